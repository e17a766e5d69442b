/*-------------------------------------------------------------------------
 *
 * cells.c
 *	  The cell registry as claims.v1 shows it: CellInfo, listed by
 *	  claims_get_cells (GetCells) and added to claims_get_record's answer
 *	  (GetRecordResponse.cell_info).
 *
 * An administrator sets a cell's address, session prefix and sequence
 * ranges with claims_set_cell_info(); the per-backend cell cache (auth.c)
 * holds them with the role bindings.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"

PG_FUNCTION_INFO_V1(claims_get_cells);

/* One SequenceRange {minval, maxval} (inclusive). */
static void
claims_json_sequence_range(ClaimsJson *js, int64 minval, int64 maxval)
{
	claims_json_begin_object(js);
	claims_json_int64_member(js, "minval", minval);
	claims_json_int64_member(js, "maxval", maxval);
	claims_json_end_object(js);
}

/*
 * A CellInfo {id, address, session_prefix, sequence_range,
 * sequence_ranges}: sequence_range, the older singular field, is the first
 * range. Unset fields are left out. A cell that is not registered (open
 * mode takes any cell id) has its id only. Strings are copied: the cache
 * may be replaced before the document is finished.
 */
static void
claims_json_cell(ClaimsJson *js, int64 cell_id, const ClaimsCell *cell)
{
	claims_json_begin_object(js);
	claims_json_int64_member(js, "id", cell_id);
	if (cell != NULL)
	{
		if (cell->address)
			claims_json_string_member(js, "address", pstrdup(cell->address),
									  strlen(cell->address));
		if (cell->session_prefix)
			claims_json_string_member(js, "session_prefix", pstrdup(cell->session_prefix),
									  strlen(cell->session_prefix));
		if (cell->nranges > 0)
		{
			claims_json_key(js, "sequence_range");
			claims_json_sequence_range(js, cell->minvals[0], cell->maxvals[0]);
			claims_json_key(js, "sequence_ranges");
			claims_json_begin_array(js);
			for (int i = 0; i < cell->nranges; i++)
				claims_json_sequence_range(js, cell->minvals[i], cell->maxvals[i]);
			claims_json_end_array(js);
		}
	}
	claims_json_end_object(js);
}

/* The CellInfo of a cell by id (GetRecordResponse.cell_info). */
void
claims_json_cell_info(ClaimsJson *js, int64 cell_id)
{
	claims_json_cell(js, cell_id, claims_cell_by_id(cell_id));
}

/*
 * claims_get_cells(request jsonb) returns jsonb: GetCellsResponse,
 * {"cells": [CellInfo]}, every registered cell (disabled ones too) in id
 * order. For the roles of registered, enabled cells and administrators.
 */
Datum
claims_get_cells(PG_FUNCTION_ARGS)
{
	MemoryContext caller = CurrentMemoryContext;
	ClaimsCall	call;
	const ClaimsCell *all;
	int			n;
	ClaimsJson	js;
	Jsonb	   *result;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("request must not be NULL")));

	claims_spi_begin(fcinfo, &call);
	claims_authorize_get_cells();
	claims_parse_get_cells(PG_GETARG_JSONB_P(0));
	all = claims_cells_all(&n);

	claims_json_init(&js);
	claims_json_begin_object(&js);
	if (claims_json_list_member(&js, "cells", n))
	{
		for (int i = 0; i < n; i++)
			claims_json_cell(&js, all[i].cell_id, &all[i]);
		claims_json_end_array(&js);
	}
	MemoryContextSwitchTo(caller);
	claims_json_end_object(&js);
	result = claims_json_finish(&js);

	claims_spi_end(&call);
	PG_RETURN_JSONB_P(result);
}
