/*-------------------------------------------------------------------------
 *
 * uuid7.c
 *	  Time-ordered UUIDs (RFC 9562 version 7) for leases and claims.
 *
 * 48 bits of Unix time in milliseconds, then 12 bits of sub-millisecond
 * time (so identifiers made by one backend keep increasing), then 62 bits
 * from the server's strong random source. New rows land at the right edge
 * of the primary key index instead of on random pages.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "uuid7.h"

#include <time.h>

/* Last timestamp handed out by this backend, in 1/4096 ms steps. */
static uint64 last_tick = 0;

/*
 * Fill out[0..n-1] with increasing version 7 UUIDs.
 */
void
claims_uuid7_fill(pg_uuid_t *out, int n)
{
	struct timespec now;
	uint64		tick;
	uint8	   *random_bytes;

	if (n <= 0)
		return;

	clock_gettime(CLOCK_REALTIME, &now);
	/* milliseconds << 12 | fraction of the millisecond in 1/4096 steps */
	tick = ((uint64) now.tv_sec * 1000 + now.tv_nsec / 1000000) << 12;
	tick |= (uint64) ((now.tv_nsec % 1000000) * 4096 / 1000000);

	random_bytes = palloc(8 * n);
	if (!pg_strong_random(random_bytes, 8 * n))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate random values for a UUID")));

	for (int i = 0; i < n; i++)
	{
		uint8	   *b = out[i].data;
		uint64		ms;
		uint16		frac;

		if (tick <= last_tick)
			tick = last_tick + 1;
		last_tick = tick;

		ms = tick >> 12;
		frac = (uint16) (tick & 0xFFF);
		b[0] = (uint8) (ms >> 40);
		b[1] = (uint8) (ms >> 32);
		b[2] = (uint8) (ms >> 24);
		b[3] = (uint8) (ms >> 16);
		b[4] = (uint8) (ms >> 8);
		b[5] = (uint8) ms;
		b[6] = (uint8) (0x70 | (frac >> 8));
		b[7] = (uint8) (frac & 0xFF);
		memcpy(&b[8], &random_bytes[8 * i], 8);
		b[8] = (uint8) (0x80 | (b[8] & 0x3F));	/* RFC 9562 variant */
	}
	pfree(random_bytes);
}
