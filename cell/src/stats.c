/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  claims_cell.stats(): calls to the store, their outcomes, the circuit
 *	  breaker and the latency, behind the view claims_cell.stats.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "access/htup_details.h"
#include "funcapi.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(claims_cell_stats);

/*
 * One row: this database's counters (or this backend's without preload).
 * Fills as many columns as the installed version's function declares.
 */
Datum
claims_cell_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[CELL_STAT_COUNT + 9];
	bool		nulls[CELL_STAT_COUNT + 9] = {0};
	CellStatsSnapshot s;
	int			i = 0;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (desc->natts > lengthof(values))
		elog(ERROR, "claims_cell.stats() declares more columns than this library fills");
	cell_stats_read(&s);
	values[i++] = CStringGetTextDatum(s.shared ? "database" : "backend");
	for (int k = 0; k <= CELL_STAT_BREAKER_REJECTIONS; k++)
		values[i++] = Int64GetDatum((int64) s.counters[k]);
	values[i++] = CStringGetTextDatum(s.breaker_state);
	values[i++] = Int32GetDatum(s.in_flight);
	nulls[i] = nulls[i + 1] = (s.latency_n == 0);
	values[i++] = Float8GetDatum(s.latency_n > 0 ? s.latency_sum_ms / s.latency_n : 0);
	values[i++] = Float8GetDatum(s.latency_max_ms);
	/* 1.2: the background worker's passes */
	for (int k = CELL_STAT_RECONCILE_PASSES; k <= CELL_STAT_RECONCILE_ORPHANS; k++)
		values[i++] = Int64GetDatum((int64) s.counters[k]);
	nulls[i] = (s.last_reconcile == 0);
	values[i++] = TimestampTzGetDatum(s.last_reconcile);
	/* 1.3: the background worker's verifications */
	for (int k = CELL_STAT_VERIFY_RUNS; k <= CELL_STAT_VERIFY_REPAIRED; k++)
		values[i++] = Int64GetDatum((int64) s.counters[k]);
	nulls[i] = (s.last_verify == 0);
	values[i++] = TimestampTzGetDatum(s.last_verify);
	/* 1.4: destroys of values the store did not hold */
	values[i++] = Int64GetDatum((int64) s.counters[CELL_STAT_UNCLAIMED_DESTROYS]);
	values[i++] = Int64GetDatum((int64) s.counters[CELL_STAT_RECONCILE_FAILURES]);
	values[i++] = Int64GetDatum((int64) s.latency_n);
	values[i++] = Float8GetDatum(s.latency_sum_ms);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
