/*
 * bgw_database.h
 *	  The database of a background worker's cycles (bgw_database.c), shared
 *	  by both extensions.
 */
#ifndef CLAIMS_BGW_DATABASE_H
#define CLAIMS_BGW_DATABASE_H

#include "library_local.h"

/* Whether cycles can run in a database, as a launcher last saw. */
typedef enum ClaimsBgwDatabaseState
{
	CLAIMS_BGW_DB_AVAILABLE,
	CLAIMS_BGW_DB_MISSING,
	CLAIMS_BGW_DB_NO_CONNECTIONS
} ClaimsBgwDatabaseState;

extern CLAIMS_LIBRARY_LOCAL bool claims_bgw_database_wanted(Oid dboid);
extern CLAIMS_LIBRARY_LOCAL ClaimsBgwDatabaseState claims_bgw_find_database(const char *name, Oid *oid);

#endif							/* CLAIMS_BGW_DATABASE_H */
