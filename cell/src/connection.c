/*-------------------------------------------------------------------------
 *
 * connection.c
 *	  The backend's one libpq connection to the claims store.
 *
 * Opened on first need with PQconnectStartParams + PQconnectPoll, every
 * wait in a WaitLatchOrSocket loop under a deadline of
 * claims_cell.call_timeout (connecting included) that stays cancellable
 * when the caller allows it. A call that fails to connect, loses its
 * connection or misses its deadline discards the connection and is tried
 * once more. Options are read in a transaction (cell_conn_prepare) and
 * kept, so the calls after the local commit need no catalog access.
 * ALTER SERVER / USER MAPPING mark the connection stale.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "libpq-fe.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

static PGconn *cell_conn = NULL;
static Oid	cell_conn_server = InvalidOid;
static Oid	cell_conn_user = InvalidOid;
static bool cell_conn_stale = true;
static char **cell_keywords = NULL;
static char **cell_values = NULL;
static char *cell_schema = NULL;	/* quoted schema of the store's functions */
static char *cell_label = NULL;		/* host:port/dbname for messages */

static void cell_conn_set_options(List *kw, List *vals);

/* Syscache callback: a server or user mapping changed. */
static void
cell_conn_invalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	cell_conn_stale = true;
}

/* Register the invalidation callbacks (once per backend). */
void
cell_conn_init(void)
{
	CacheRegisterSyscacheCallback(FOREIGNSERVEROID, cell_conn_invalidate, (Datum) 0);
	CacheRegisterSyscacheCallback(USERMAPPINGOID, cell_conn_invalidate, (Datum) 0);
}

/* Close the connection (after a timeout, a failure or a change). */
static void
cell_conn_discard(void)
{
	if (cell_conn)
	{
		/* a statement may still run at the store: cancel it (postgres_fdw) */
		if (PQtransactionStatus(cell_conn) == PQTRANS_ACTIVE)
		{
			PGcancel   *cancel = PQgetCancel(cell_conn);
			char		errbuf[256];

			if (cancel != NULL)
			{
				(void) PQcancel(cancel, errbuf, sizeof(errbuf));
				PQfreeCancel(cancel);
			}
		}
		PQfinish(cell_conn);
	}
	cell_conn = NULL;
	if (cell_schema)
		pfree(cell_schema);
	cell_schema = NULL;
}

/* Where the store is, for messages. */
char *
cell_server_label(void)
{
	return cell_label ? cell_label : "(not configured)";
}

/*
 * Read the server's and the current user's mapping options (inside a
 * transaction) unless they are current; a change closes the connection.
 */
void
cell_conn_prepare(Oid serverid)
{
	List	   *kw;
	List	   *vals;

	if (!cell_conn_stale && serverid == cell_conn_server && GetUserId() == cell_conn_user)
		return;
	cell_conn_options(serverid, GetUserId(), &kw, &vals);
	cell_conn_set_options(kw, vals);
	cell_conn_server = serverid;
	cell_conn_user = GetUserId();
	cell_conn_stale = false;
}

/*
 * Use these libpq options from now on (closing the connection), with the
 * application name and client encoding added.
 */
static void
cell_conn_set_options(List *kw, List *vals)
{
	MemoryContext old;
	int			n;
	int			i = 0;
	ListCell   *lk,
			   *lv;
	const char *host = "";
	const char *port = "";
	const char *dbname = "";

	cell_conn_discard();
	old = MemoryContextSwitchTo(TopMemoryContext);
	if (cell_keywords)
	{
		for (i = 0; cell_keywords[i]; i++)
		{
			pfree(cell_keywords[i]);
			pfree(cell_values[i]);
		}
		pfree(cell_keywords);
		pfree(cell_values);
	}
	n = list_length(kw);
	cell_keywords = palloc0(sizeof(char *) * (n + 3));
	cell_values = palloc0(sizeof(char *) * (n + 3));
	i = 0;
	forboth(lk, kw, lv, vals)
	{
		cell_keywords[i] = pstrdup(lfirst(lk));
		cell_values[i] = pstrdup(lfirst(lv));
		if (strcmp(cell_keywords[i], "host") == 0)
			host = cell_values[i];
		else if (strcmp(cell_keywords[i], "port") == 0)
			port = cell_values[i];
		else if (strcmp(cell_keywords[i], "dbname") == 0)
			dbname = cell_values[i];
		i++;
	}
	cell_keywords[i] = pstrdup("fallback_application_name");
	cell_values[i] = pstrdup("claims_cell");
	i++;
	cell_keywords[i] = pstrdup("client_encoding");
	cell_values[i] = pstrdup(GetDatabaseEncodingName());	/* as postgres_fdw */
	if (cell_label)
		pfree(cell_label);
	cell_label = psprintf("%s:%s/%s", host, port, dbname);
	MemoryContextSwitchTo(old);
}

/*
 * Use the options a worker cycle published ("k\0v\0...\0"; empty: none),
 * for a process that cannot read the catalogs.
 */
void
cell_conn_load_options(const char *packed)
{
	List	   *kw = NIL;
	List	   *vals = NIL;

	while (*packed)
	{
		const char *k = packed;
		const char *v = k + strlen(k) + 1;

		kw = lappend(kw, pstrdup(k));
		vals = lappend(vals, pstrdup(v));
		packed = v + strlen(v) + 1;
	}
	cell_conn_set_options(kw, vals);
	if (kw == NIL)
	{
		pfree(cell_keywords[0]);
		cell_keywords[0] = NULL;	/* nothing to connect to */
	}
	cell_conn_server = InvalidOid;
	cell_conn_stale = false;
}

/* The socket of the open connection, or PGINVALID_SOCKET. */
pgsocket
cell_conn_socket(void)
{
	if (cell_conn == NULL || PQstatus(cell_conn) != CONNECTION_OK)
		return PGINVALID_SOCKET;
	return PQsocket(cell_conn);
}

/*
 * Read what arrived on the connection (a LISTEN session) and say whether a
 * notification on channel carries "cell_id" : cell_id in its JSON payload.
 * A lost connection is discarded.
 */
bool
cell_conn_take_notifications(const char *channel, int64 cell_id)
{
	PGnotify   *n;
	bool		found = false;

	if (cell_conn == NULL)
		return false;
	if (!PQconsumeInput(cell_conn))
	{
		ereport(LOG,
				(errmsg("claims_cell: the LISTEN connection to the claims store at %s was lost: %s",
						cell_server_label(), PQerrorMessage(cell_conn))));
		cell_conn_discard();
		return false;
	}
	while ((n = PQnotifies(cell_conn)) != NULL)
	{
		const char *p = strstr(n->extra, "\"cell_id\"");

		if (strcmp(n->relname, channel) == 0 && p != NULL)
		{
			p += strlen("\"cell_id\"");
			while (*p == ' ' || *p == ':')
				p++;
			if (strtoll(p, NULL, 10) == cell_id)
				found = true;
		}
		PQfreemem(n);
	}
	return found;
}

/*
 * Wait until the socket is ready, the deadline passes (false) or, when
 * interruptible, an interrupt arrives (raised by CHECK_FOR_INTERRUPTS).
 */
static bool
cell_wait(PGconn *conn, bool for_write, TimestampTz deadline, bool interruptible)
{
	for (;;)
	{
		long		ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		int			rc;

		if (ms <= 0)
			return false;
		rc = WaitLatchOrSocket(MyLatch,
							   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH |
							   (for_write ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE),
							   PQsocket(conn), ms, PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			if (interruptible)
				CHECK_FOR_INTERRUPTS();
		}
		if (rc & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE))
			return true;
	}
}

/* Record a local failure in the result. */
static CellCallStatus
cell_fail(CellCallResult *r, CellCallStatus st, const char *what)
{
	int			len = strlen(what);

	while (len > 0 && (what[len - 1] == '\n' || what[len - 1] == ' '))
		len--;
	r->status = st;
	r->message = pnstrdup(what, len);
	r->sqlstate[0] = '\0';
	return st;
}

/* Open the connection before the deadline. */
static CellCallStatus
cell_connect(TimestampTz deadline, bool interruptible, CellCallResult *r)
{
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;

	if (cell_keywords == NULL)
		return cell_fail(r, CELL_CALL_UNREACHABLE, "the claims store is not configured");
	cell_conn = PQconnectStartParams((const char *const *) cell_keywords,
									 (const char *const *) cell_values, false);
	if (cell_conn == NULL)
		return cell_fail(r, CELL_CALL_UNREACHABLE, "out of memory");
	if (PQstatus(cell_conn) == CONNECTION_BAD)
		return cell_fail(r, CELL_CALL_UNREACHABLE, PQerrorMessage(cell_conn));
	for (;;)
	{
		if (st == PGRES_POLLING_OK)
			break;
		if (st == PGRES_POLLING_FAILED)
			return cell_fail(r, CELL_CALL_UNREACHABLE, PQerrorMessage(cell_conn));
		if (!cell_wait(cell_conn, st == PGRES_POLLING_WRITING, deadline, interruptible))
			return cell_fail(r, CELL_CALL_TIMEOUT, "connecting timed out");
		st = PQconnectPoll(cell_conn);
	}
	if (PQsetnonblocking(cell_conn, 1) != 0)
		return cell_fail(r, CELL_CALL_UNREACHABLE, PQerrorMessage(cell_conn));
	return CELL_CALL_OK;
}

/*
 * Run one statement before the deadline; the first column of the first row
 * goes to r->value, a remote error to r's error fields.
 */
static CellCallStatus
cell_exec(const char *sql, int nparams, const char *const *params,
		  TimestampTz deadline, bool interruptible, CellCallResult *r)
{
	PGresult   *volatile last = NULL;
	PGresult   *res;
	int			flushed;
	CellCallStatus status = CELL_CALL_OK;

	if (!PQsendQueryParams(cell_conn, sql, nparams, NULL, params, NULL, NULL, 0))
		return cell_fail(r, CELL_CALL_UNREACHABLE, PQerrorMessage(cell_conn));
	r->sent = true;
	while ((flushed = PQflush(cell_conn)) == 1)
	{
		if (!cell_wait(cell_conn, true, deadline, interruptible))
			return cell_fail(r, CELL_CALL_TIMEOUT, "sending timed out");
	}
	if (flushed < 0)
		return cell_fail(r, CELL_CALL_UNREACHABLE, PQerrorMessage(cell_conn));
	/* an interrupt in cell_wait must not leak the result held in last */
	PG_TRY();
	{
		for (;;)
		{
			while (PQisBusy(cell_conn))
			{
				if (!cell_wait(cell_conn, false, deadline, interruptible))
				{
					PQclear(last);
					last = NULL;
					status = cell_fail(r, CELL_CALL_TIMEOUT, "no answer before the deadline");
					break;
				}
				if (!PQconsumeInput(cell_conn))
				{
					PQclear(last);
					last = NULL;
					status = cell_fail(r, CELL_CALL_UNREACHABLE, PQerrorMessage(cell_conn));
					break;
				}
			}
			if (status != CELL_CALL_OK)
				break;
			res = PQgetResult(cell_conn);
			if (res == NULL)
				break;
			PQclear(last);
			last = res;
		}
	}
	PG_CATCH();
	{
		PQclear(last);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (status != CELL_CALL_OK)
		return status;
	if (last == NULL || PQstatus(cell_conn) == CONNECTION_BAD)
	{
		PQclear(last);
		return cell_fail(r, CELL_CALL_UNREACHABLE, PQerrorMessage(cell_conn));
	}
	if (PQresultStatus(last) == PGRES_TUPLES_OK || PQresultStatus(last) == PGRES_COMMAND_OK)
	{
		r->status = CELL_CALL_OK;
		r->value = NULL;
		if (PQresultStatus(last) == PGRES_TUPLES_OK && PQntuples(last) > 0 &&
			PQnfields(last) > 0 && !PQgetisnull(last, 0, 0))
			r->value = pstrdup(PQgetvalue(last, 0, 0));
	}
	else
	{
		const char *f;

		r->status = CELL_CALL_REMOTE_ERROR;
		f = PQresultErrorField(last, PG_DIAG_SQLSTATE);
		strlcpy(r->sqlstate, f ? f : "XX000", sizeof(r->sqlstate));
		f = PQresultErrorField(last, PG_DIAG_MESSAGE_PRIMARY);
		r->message = pstrdup(f ? f : PQerrorMessage(cell_conn));
		f = PQresultErrorField(last, PG_DIAG_MESSAGE_DETAIL);
		r->detail = f ? pstrdup(f) : NULL;
		f = PQresultErrorField(last, PG_DIAG_MESSAGE_HINT);
		r->hint = f ? pstrdup(f) : NULL;
	}
	PQclear(last);
	return r->status;
}

/* Find the schema of the store's extension on a fresh connection. */
static CellCallStatus
cell_find_schema(TimestampTz deadline, bool interruptible, CellCallResult *r)
{
	CellCallStatus st;
	char	   *quoted;

	st = cell_exec("SELECT n.nspname FROM pg_catalog.pg_extension e"
				   " JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace"
				   " WHERE e.extname = 'claims'", 0, NULL, deadline, interruptible, r);
	if (st != CELL_CALL_OK)
		return st;
	if (r->value == NULL)
	{
		r->status = CELL_CALL_REMOTE_ERROR;
		strlcpy(r->sqlstate, "42704", sizeof(r->sqlstate));
		r->message = pstrdup("extension \"claims\" is not installed in the store's database");
		return r->status;
	}
	quoted = PQescapeIdentifier(cell_conn, r->value, strlen(r->value));
	if (quoted == NULL)
		return cell_fail(r, CELL_CALL_UNREACHABLE, PQerrorMessage(cell_conn));
	cell_schema = MemoryContextStrdup(TopMemoryContext, quoted);
	PQfreemem(quoted);
	r->value = NULL;
	return CELL_CALL_OK;
}

/* The quoted schema of the store's functions (after a successful call). */
const char *
cell_store_schema(void)
{
	return cell_schema;
}

/* One try of a call: connect if needed, find the schema, run the statement. */
static CellCallStatus
cell_try(const char *sql, int nparams, const char *const *params,
		 TimestampTz deadline, bool interruptible, CellCallResult *r)
{
	CellCallStatus st;
	char	   *full;

	/* a call ended by FATAL left its command running: start afresh */
	if (cell_conn != NULL && PQtransactionStatus(cell_conn) == PQTRANS_ACTIVE)
		cell_conn_discard();
	if (cell_conn == NULL && (st = cell_connect(deadline, interruptible, r)) != CELL_CALL_OK)
		return st;
	if (cell_schema == NULL && (st = cell_find_schema(deadline, interruptible, r)) != CELL_CALL_OK)
		return st;
	/* "%s" in sql stands for the store's schema */
	full = psprintf(sql, cell_schema, cell_schema, cell_schema);
	return cell_exec(full, nparams, params, deadline, interruptible, r);
}

/*
 * One try admitted by the circuit breaker: an error (an interrupt) discards
 * the connection and gives the admission back before it is raised. A
 * function of its own, so that no local of the caller's retry loop lives
 * across the setjmp (gcc 14 reports the loop counter as clobbered).
 */
static CellCallStatus
cell_try_admitted(const char *sql, int nparams, const char *const *params,
				  TimestampTz start, bool interruptible, bool probe, CellCallResult *r)
{
	CellCallStatus st;

	PG_TRY();
	{
		st = cell_try(sql, nparams, params,
					  TimestampTzPlusMilliseconds(start, cell_call_timeout_ms),
					  interruptible, r);
	}
	PG_CATCH();
	{
		cell_conn_discard();
		cell_breaker_leave(-1, probe, 0);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return st;
}

/*
 * Call the store: sql names the store's schema with %s. At most two tries
 * (the second only after a connection failure or a timeout), each under
 * its own deadline and admitted by the circuit breaker. Never raises for
 * the store's sake; an interrupt (when interruptible) discards the
 * connection and is raised.
 */
void
cell_call(const char *sql, int nparams, const char *const *params,
		  bool interruptible, CellCallResult *r)
{
	memset(r, 0, sizeof(*r));
	for (int attempt = 1; attempt <= 2; attempt++)
	{
		bool		probe;
		CellCallStatus st;
		TimestampTz start;

		r->tries = attempt;
		st = cell_breaker_enter(&probe);
		if (st != CELL_CALL_OK)
		{
			cell_fail(r, st, st == CELL_CALL_BUSY
					  ? "too many calls to the claims store are in flight"
					  : "the circuit breaker is open");
			return;
		}
		cell_stats_count(CELL_STAT_CALLS);
		start = GetCurrentTimestamp();
		st = cell_try_admitted(sql, nparams, params, start, interruptible, probe, r);

		if (st == CELL_CALL_OK || st == CELL_CALL_REMOTE_ERROR)
		{
			cell_breaker_leave(1, probe,
							   (double) (GetCurrentTimestamp() - start) / 1000.0);
			return;
		}
		/* a request abandoned by this try may still be done at the store */
		if (r->sent)
			r->abandoned = true;
		cell_conn_discard();
		cell_breaker_leave(0, probe, 0);
		cell_stats_count(st == CELL_CALL_TIMEOUT ? CELL_STAT_TIMEOUTS : CELL_STAT_FAILURES);
		ereport(LOG,
				(errmsg("claims_cell: call %d of 2 to the claims store at %s failed: %s",
						attempt, cell_server_label(), r->message)));
	}
}

/*
 * Raise 08006 for a call that did not reach the store: unreachable, too
 * slow, or refused at once by the circuit breaker.
 */
void
cell_raise_unreachable(const CellCallResult *r)
{
	switch (r->status)
	{
		case CELL_CALL_TIMEOUT:
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("the claims store at %s did not answer within claims_cell.call_timeout (%d ms)",
							cell_server_label(), cell_call_timeout_ms),
					 errdetail("%d tries: %s.", r->tries, r->message),
					 errhint("Nothing was claimed; retry later.")));
			break;
		case CELL_CALL_BREAKER_OPEN:
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("the claims store at %s is unavailable: the circuit breaker is open",
							cell_server_label()),
					 errhint("After repeated failures calls fail at once for claims_cell.breaker_cooldown; nothing was claimed, retry later.")));
			break;
		case CELL_CALL_BUSY:
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("too many calls to the claims store at %s are in flight",
							cell_server_label()),
					 errdetail("claims_cell.max_concurrent_calls is %d.", cell_max_concurrent_calls),
					 errhint("Nothing was claimed; retry later.")));
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not reach the claims store at %s", cell_server_label()),
					 errdetail("%s", r->message ? r->message : "unknown failure"),
					 errhint("Nothing was claimed; retry when the claims store is reachable.")));
	}
	pg_unreachable();
}

/* Raise the store's own error as it was reported, prefixed with what failed. */
void
cell_raise_remote(const CellCallResult *r, const char *what)
{
	const char *s = r->sqlstate;

	ereport(ERROR,
			(errcode(MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4])),
			 errmsg("%s: %s", what, r->message),
			 r->detail ? errdetail_internal("%s", r->detail) : 0,
			 r->hint ? errhint("%s", r->hint) : 0));
	pg_unreachable();
}

/*
 * One page of a store listing (claims_list_leases, claims_list_records):
 * the function called with the jsonb request through server's connection,
 * its jsonb answer returned. Raises what the store raises, prefixed with
 * what, and 08006 when it cannot be reached.
 */
Datum
cell_call_listing(const char *server, Datum request, const char *function, const char *what)
{
	const char *params[1];
	char	   *sql;
	CellCallResult r;

	cell_conn_prepare(cell_server_oid(server, false));
	params[0] = DatumGetCString(DirectFunctionCall1(jsonb_out, request));
	sql = psprintf("SELECT %%s.%s($1::jsonb)", function);
	cell_call(sql, 1, params, true, &r);
	if (r.status == CELL_CALL_REMOTE_ERROR)
		cell_raise_remote(&r, what);
	if (r.status != CELL_CALL_OK)
		cell_raise_unreachable(&r);
	if (r.value == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("the claims store answered %s with NULL", function)));
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(r.value));
}
