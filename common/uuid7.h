/*
 * uuid7.h
 *	  Time-ordered UUIDs (uuid7.c), shared by both extensions.
 */
#ifndef CLAIMS_UUID7_H
#define CLAIMS_UUID7_H

#include "library_local.h"
#include "utils/uuid.h"

extern CLAIMS_LIBRARY_LOCAL void claims_uuid7_fill(pg_uuid_t *out, int n);

#endif							/* CLAIMS_UUID7_H */
