/*
 * malloc_thresholds.h
 *	  Keeping a backend's page-sized allocations in glibc's heap
 *	  (malloc_thresholds.c), shared by both extensions.
 */
#ifndef CLAIMS_MALLOC_THRESHOLDS_H
#define CLAIMS_MALLOC_THRESHOLDS_H

#include "library_local.h"

extern CLAIMS_LIBRARY_LOCAL void claims_set_malloc_thresholds(void);

#endif							/* CLAIMS_MALLOC_THRESHOLDS_H */
