/*-------------------------------------------------------------------------
 *
 * identity.c
 *	  The configuration row and what identifies the database it was made
 *	  in: nothing reaches the store from a copy of a cell's database.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "access/xlog.h"
#include "executor/spi.h"
#include "miscadmin.h"

/*
 * Raise 55000 when this database is not the one configure() ran in: a copy
 * (CREATE DATABASE ... TEMPLATE, a dump restored elsewhere, pg_upgrade)
 * would claim and release values as that cell, so nothing may reach the
 * store from it. known is false before the 1.4 update recorded them.
 */
void
cell_check_identity(int64 cell_id, bool known, int64 sysid, Oid dboid)
{
	int64		here = (int64) GetSystemIdentifier();

	if (!known || (sysid == here && dboid == MyDatabaseId))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("this database is a copy of the database of cell %lld", (long long) cell_id),
			 errdetail("claims_cell.configure() ran in database %u of the cluster with system identifier %lld;"
					   " this is database %u of the cluster with system identifier %lld."
					   " A copy claims nothing, lest it claim and release values as that cell.",
					   dboid, (long long) sysid, MyDatabaseId, (long long) here),
			 errhint("If this database is now that cell (a restore or pg_upgrade that replaces it), call claims_cell.configure(server_name, cell_id) here."
					 " To use the copy without claiming, run SELECT claims_cell.unclaim_column(table_name, column_name) FROM claims_cell.claimed_columns,"
					 " or DROP EXTENSION claims_cell.")));
}

/*
 * After CELL_CONFIGURATION_SQL (inside SPI) found the row: check that this
 * database is the one configured.
 */
void
cell_check_configuration_row(void)
{
	bool		isnull,
				n1,
				n2;
	int64		cell_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	Datum		sysid = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &n1);
	Datum		dboid = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &n2);

	cell_check_identity(cell_id, !n1 && !n2, n1 ? 0 : DatumGetInt64(sysid),
						n2 ? InvalidOid : DatumGetObjectId(dboid));
}

/*
 * The store helpers reconcile() and verify() use refuse in a copy (their
 * own SPI connection; nothing when not configured: they say so themselves).
 */
void
cell_require_identity(void)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "claims_cell: SPI_connect failed");
	if (SPI_execute(CELL_CONFIGURATION_SQL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "claims_cell: reading the configuration failed");
	if (SPI_processed > 0)
		cell_check_configuration_row();
	SPI_finish();
}
