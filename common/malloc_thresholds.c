/*-------------------------------------------------------------------------
 *
 * malloc_thresholds.c
 *	  A backend that handles pages of hundreds of kB on every call keeps
 *	  them in glibc's heap instead of mapping, faulting in and unmapping
 *	  them each time.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "malloc_thresholds.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

/*
 * glibc serves a request from 128 kB up with mmap, and gives the free top of
 * its heap back to the kernel beyond twice the largest mapping freed so far.
 * A call allocates and frees more than that every time: the begin
 * statement's executor state (its constraint and projection expressions)
 * passes 128 kB, a listing page and its text are several hundred kB. With
 * the defaults every such call grows the heap or maps memory, faults the
 * pages in and gives them back (a few per cent of a signup's CPU, and TLB
 * shootdowns on the other cores). Keep sizes up to a page of the largest
 * limit (1000 records, about 2 MB of text) in the heap: a backend then keeps
 * at most the trim threshold of freed heap. The store sets them on a
 * backend's first API call, claims_cell when verify() lists and compares
 * (its pages and their arrays, the same sizes): backends that do neither
 * keep glibc's defaults.
 */
#define CLAIMS_MMAP_THRESHOLD (4 * 1024 * 1024)
#define CLAIMS_TRIM_THRESHOLD (8 * 1024 * 1024)

static bool malloc_thresholds_set = false;

/* Set this backend's malloc thresholds, once (see CLAIMS_MMAP_THRESHOLD). */
void
claims_set_malloc_thresholds(void)
{
	if (malloc_thresholds_set)
		return;
#ifdef __GLIBC__
	(void) mallopt(M_MMAP_THRESHOLD, CLAIMS_MMAP_THRESHOLD);
	(void) mallopt(M_TRIM_THRESHOLD, CLAIMS_TRIM_THRESHOLD);
#endif
	malloc_thresholds_set = true;
}
