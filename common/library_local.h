/*
 * library_local.h
 *	  Functions that both extensions' libraries build from the same source
 *	  in common/ (uuid7.c, bgw_database.c, malloc_thresholds.c, refusal.c) are local
 *	  to each library: PostgreSQL 15 loads libraries with RTLD_GLOBAL, and a
 *	  backend that loaded both must call each library's own copy.
 */
#ifndef CLAIMS_LIBRARY_LOCAL_H
#define CLAIMS_LIBRARY_LOCAL_H

#if defined(__GNUC__) && !defined(WIN32)
#define CLAIMS_LIBRARY_LOCAL __attribute__((visibility("hidden")))
#else
#define CLAIMS_LIBRARY_LOCAL
#endif

#endif							/* CLAIMS_LIBRARY_LOCAL_H */
