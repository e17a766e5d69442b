/*-------------------------------------------------------------------------
 *
 * sourcekey.c
 *	  The source id of a claimed row: its primary key, as the store keeps it
 *	  (rails_primary_key_id), built in C by the row trigger and in SQL by
 *	  the lookups of holders.c and verify().
 *
 * A key of one column keeps the form every release had: an integer as 8
 * bytes big-endian (two's complement), a uuid as its 16 bytes, a text as
 * its bytes. A key of several columns (a partitioned table's primary key
 * includes the partition key) is the concatenation of its columns in key
 * order, each in a form that sorts as the column does: an integer as 8
 * bytes big-endian with the sign bit flipped, a uuid as its 16 bytes, a
 * text as its bytes (in the server encoding) and a 0 byte, which no text
 * holds. Byte order of such ids is the order of ROW(columns) with texts
 * compared by "C" collation, so verify() can walk the table in ranges of
 * source ids.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "access/relation.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(claims_cell_source_id_sql);
PG_FUNCTION_INFO_V1(claims_cell_source_key_values);

#define CELL_INT_SIGN UINT64CONST(0x8000000000000000)

/* Whether a type is an integer type. */
bool
cell_is_integer_type(Oid typid)
{
	return typid == INT2OID || typid == INT4OID || typid == INT8OID;
}

/* Whether a column type can be part of a source id. */
static bool
cell_is_key_type(Oid typid)
{
	return cell_is_integer_type(typid) || typid == UUIDOID || typid == TEXTOID ||
		typid == VARCHAROID;
}

/* Parse a trigger's source key argument: "3", or "1,3" for several columns. */
void
cell_source_key_parse(const char *arg, CellSourceKey *key)
{
	const char *p = arg;

	key->n = 0;
	while (*p)
	{
		char	   *end;
		long		attnum = strtol(p, &end, 10);

		if (end == p || attnum <= 0 || attnum > MaxAttrNumber || key->n >= INDEX_MAX_KEYS ||
			(*end != ',' && *end != '\0'))
			elog(ERROR, "claims_cell: malformed source key argument \"%s\"", arg);
		key->attnums[key->n++] = (AttrNumber) attnum;
		p = *end == ',' ? end + 1 : end;
	}
	if (key->n == 0)
		elog(ERROR, "claims_cell: empty source key argument");
}

/* The trigger argument of a source key ("1,3"). */
char *
cell_source_key_arg(const CellSourceKey *key)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < key->n; i++)
		appendStringInfo(&buf, "%s%d", i > 0 ? "," : "", key->attnums[i]);
	return buf.data;
}

/* The source key of a smallint[] (claimed_attributes.source_attnums). */
void
cell_source_key_from_array(ArrayType *arr, CellSourceKey *key)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	deconstruct_array(arr, INT2OID, 2, true, TYPALIGN_SHORT, &elems, &nulls, &n);
	if (n < 1 || n > INDEX_MAX_KEYS)
		elog(ERROR, "claims_cell: a source key has 1 to %d columns, not %d", INDEX_MAX_KEYS, n);
	key->n = n;
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			elog(ERROR, "claims_cell: a source key column is NULL");
		key->attnums[i] = DatumGetInt16(elems[i]);
	}
}

/* The primary key of a table, which becomes the source id, or 22023. */
void
cell_source_key_of_table(Relation rel, CellSourceKey *key)
{
	Oid			pk = RelationGetPrimaryKeyIndex(rel);
	HeapTuple	tup;
	Form_pg_index idx;

	if (!OidIsValid(pk))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("table \"%s\" has no primary key", RelationGetRelationName(rel)),
				 errdetail("The primary key of a row is its source id at the claims store.")));
	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(pk));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for index %u", pk);
	idx = (Form_pg_index) GETSTRUCT(tup);
	key->n = idx->indnkeyatts;
	for (int i = 0; i < key->n; i++)
		key->attnums[i] = idx->indkey.values[i];
	ReleaseSysCache(tup);
	for (int i = 0; i < key->n; i++)
	{
		Oid			typid;

		if (key->attnums[i] <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("primary key of table \"%s\" has an expression", RelationGetRelationName(rel))));
		typid = TupleDescAttr(RelationGetDescr(rel), key->attnums[i] - 1)->atttypid;
		if (!cell_is_key_type(typid))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("primary key column \"%s\" of table \"%s\" has type %s, which cannot be part of a source id",
							NameStr(TupleDescAttr(RelationGetDescr(rel), key->attnums[i] - 1)->attname),
							RelationGetRelationName(rel), format_type_be(typid)),
					 errdetail("The source id at the claims store is made of integer, uuid and text columns.")));
	}
}

/* Raise 42703 unless every column of a source key is a live column. */
static void
cell_source_key_check(TupleDesc desc, const CellSourceKey *key, const char *table)
{
	for (int i = 0; i < key->n; i++)
		if (key->attnums[i] <= 0 || key->attnums[i] > desc->natts ||
			TupleDescAttr(desc, key->attnums[i] - 1)->attisdropped ||
			!cell_is_key_type(TupleDescAttr(desc, key->attnums[i] - 1)->atttypid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("source key attribute %d of table \"%s\" does not exist",
							key->attnums[i], table),
					 errhint("Claim the column again with claims_cell.claim_column.")));
}

/* Append the 8 bytes big-endian of an integer. */
static void
cell_append_int64(StringInfo buf, uint64 n)
{
	for (int i = 0; i < 8; i++)
		appendStringInfoChar(buf, (char) (n >> (56 - 8 * i)));
}

/* The source id of a row of a table (palloc'd, *len bytes); 23502 for a NULL key. */
char *
cell_source_id(Relation rel, HeapTuple tuple, const CellSourceKey *key, int *len)
{
	TupleDesc	desc = RelationGetDescr(rel);
	StringInfoData buf;

	cell_source_key_check(desc, key, RelationGetRelationName(rel));
	initStringInfo(&buf);
	for (int i = 0; i < key->n; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(tuple, desc, key->attnums[i], &isnull);
		Oid			typid = TupleDescAttr(desc, key->attnums[i] - 1)->atttypid;

		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("source column of table \"%s\" is NULL", RelationGetRelationName(rel))));
		if (cell_is_integer_type(typid))
		{
			int64		n = typid == INT2OID ? DatumGetInt16(d) :
				typid == INT4OID ? DatumGetInt32(d) : DatumGetInt64(d);

			cell_append_int64(&buf, key->n == 1 ? (uint64) n : (uint64) n ^ CELL_INT_SIGN);
		}
		else if (typid == UUIDOID)
			appendBinaryStringInfo(&buf, (char *) DatumGetUUIDP(d)->data, UUID_LEN);
		else
		{
			text	   *t = DatumGetTextPP(d);

			appendBinaryStringInfo(&buf, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
			if (key->n > 1)
				appendStringInfoChar(&buf, '\0');
		}
	}
	*len = buf.len;
	return buf.data;
}

/*
 * Append the SQL expression of the source id (bytea) of a row of a table
 * with the columns of alias, the same bytes as cell_source_id().
 */
void
cell_source_id_sql(StringInfo sql, TupleDesc desc, const CellSourceKey *key,
				   const char *alias, const char *table)
{
	const char *enc = quote_literal_cstr(GetDatabaseEncodingName());

	cell_source_key_check(desc, key, table);
	appendStringInfoChar(sql, '(');
	for (int i = 0; i < key->n; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, key->attnums[i] - 1);
		const char *col = quote_identifier(NameStr(att->attname));

		if (i > 0)
			appendStringInfoString(sql, " OPERATOR(pg_catalog.||) ");
		if (cell_is_integer_type(att->atttypid) && key->n == 1)
			appendStringInfo(sql, "pg_catalog.int8send(CAST(%s.%s AS pg_catalog.int8))", alias, col);
		else if (cell_is_integer_type(att->atttypid))
			appendStringInfo(sql, "pg_catalog.int8send(CAST(%s.%s AS pg_catalog.int8)"
							 " OPERATOR(pg_catalog.#) CAST(-9223372036854775808 AS pg_catalog.int8))",
							 alias, col);
		else if (att->atttypid == UUIDOID)
			appendStringInfo(sql, "pg_catalog.uuid_send(%s.%s)", alias, col);
		else
			appendStringInfo(sql, "pg_catalog.convert_to(CAST(%s.%s AS pg_catalog.text), %s)%s",
							 alias, col, enc, key->n > 1 ? " OPERATOR(pg_catalog.||) '\\x00'::pg_catalog.bytea" : "");
	}
	appendStringInfoChar(sql, ')');
}

/*
 * claims_cell.source_id_sql("table" regclass, source_attnums smallint[],
 * alias name): the SQL expression of a row's source id (for verify()).
 */
Datum
claims_cell_source_id_sql(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	CellSourceKey key;
	Relation	rel;
	StringInfoData sql;

	cell_source_key_from_array(PG_GETARG_ARRAYTYPE_P(1), &key);
	rel = relation_open(relid, AccessShareLock);
	initStringInfo(&sql);
	cell_source_id_sql(&sql, RelationGetDescr(rel), &key,
					   quote_identifier(NameStr(*PG_GETARG_NAME(2))), RelationGetRelationName(rel));
	relation_close(rel, AccessShareLock);
	PG_RETURN_TEXT_P(cstring_to_text(sql.data));
}

/*
 * claims_cell.source_key_values(source_id bytea, "table" regclass,
 * source_attnums smallint[]) RETURNS text[]: the key columns' values (as
 * text) of a source id of several columns, NULL when it is not one; for
 * verify()'s ranges.
 */
Datum
claims_cell_source_key_values(PG_FUNCTION_ARGS)
{
	bytea	   *sid = PG_GETARG_BYTEA_PP(0);
	const unsigned char *p = (const unsigned char *) VARDATA_ANY(sid);
	const unsigned char *end = p + VARSIZE_ANY_EXHDR(sid);
	CellSourceKey key;
	Datum		out[INDEX_MAX_KEYS];
	TupleDesc	desc;
	Relation	rel;

	cell_source_key_from_array(PG_GETARG_ARRAYTYPE_P(2), &key);
	rel = relation_open(PG_GETARG_OID(1), AccessShareLock);
	desc = CreateTupleDescCopy(RelationGetDescr(rel));
	relation_close(rel, AccessShareLock);
	cell_source_key_check(desc, &key, get_rel_name(PG_GETARG_OID(1)));
	for (int i = 0; i < key.n; i++)
	{
		Oid			typid = TupleDescAttr(desc, key.attnums[i] - 1)->atttypid;

		if (cell_is_integer_type(typid))
		{
			uint64		n = 0;

			if (end - p < 8)
				PG_RETURN_NULL();
			for (int j = 0; j < 8; j++)
				n = (n << 8) | *p++;
			if (key.n > 1)
				n ^= CELL_INT_SIGN;
			out[i] = CStringGetTextDatum(psprintf(INT64_FORMAT, (int64) n));
		}
		else if (typid == UUIDOID)
		{
			pg_uuid_t	u;

			if (end - p < UUID_LEN)
				PG_RETURN_NULL();
			memcpy(u.data, p, UUID_LEN);
			p += UUID_LEN;
			out[i] = DirectFunctionCall1(textin, DirectFunctionCall1(uuid_out, UUIDPGetDatum(&u)));
		}
		else
		{
			const unsigned char *z = key.n > 1 ? memchr(p, '\0', end - p) : end;
			char	   *s;

			if (z == NULL)
				PG_RETURN_NULL();
			s = pnstrdup((const char *) p, z - p);
			if (!pg_verifymbstr(s, z - p, true))
				PG_RETURN_NULL();
			out[i] = CStringGetTextDatum(s);
			p = key.n > 1 ? z + 1 : z;
		}
	}
	if (p != end)
		PG_RETURN_NULL();
	PG_RETURN_ARRAYTYPE_P(construct_array(out, key.n, TEXTOID, -1, false, TYPALIGN_INT));
}
