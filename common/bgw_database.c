/*-------------------------------------------------------------------------
 *
 * bgw_database.c
 *	  What a launcher without a database connection needs to know about the
 *	  database its cycle workers work in: whether it exists and accepts
 *	  connections, and whether a command waits to have it alone. Used by
 *	  the store's stale lease reporter (worker.c) and, compiled into it too,
 *	  by claims_cell's background worker (cell/src/worker.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/fmgroids.h"

#include "bgw_database.h"

/*
 * Whether another session holds or awaits a lock on the database that
 * keeps new sessions out (DROP DATABASE, CREATE DATABASE ... TEMPLATE,
 * ALTER DATABASE ... RENAME): tested without waiting, with the lock that a
 * connecting session takes.
 */
bool
claims_bgw_database_wanted(Oid dboid)
{
	LOCKTAG		tag;

	SET_LOCKTAG_OBJECT(tag, InvalidOid, DatabaseRelationId, dboid, 0);
	if (LockAcquire(&tag, RowExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
		return true;
	LockRelease(&tag, RowExclusiveLock, true);
	return false;
}

/*
 * Look a database up by name in the shared catalog pg_database, in a
 * transaction of its own (the caller connects to no database). Sets *oid
 * when it is available.
 */
ClaimsBgwDatabaseState
claims_bgw_find_database(const char *name, Oid *oid)
{
	ClaimsBgwDatabaseState state = CLAIMS_BGW_DB_MISSING;
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	*oid = InvalidOid;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_database_datname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum(name));
	/* no index: without a database, the relcache may not know pg_database's */
	scan = systable_beginscan(rel, DatabaseNameIndexId, false, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

#ifdef DATCONNLIMIT_INVALID_DB
		/* an interrupted DROP DATABASE left it unusable */
		if (db->datconnlimit == DATCONNLIMIT_INVALID_DB)
			state = CLAIMS_BGW_DB_MISSING;
		else
#endif
		if (!db->datallowconn)
			state = CLAIMS_BGW_DB_NO_CONNECTIONS;
		else
		{
			state = CLAIMS_BGW_DB_AVAILABLE;
			*oid = db->oid;
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return state;
}
