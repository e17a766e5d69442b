/*-------------------------------------------------------------------------
 *
 * connection.c
 *	  The backend's libpq connections to the claims store: one per user
 *	  mapping (CellConnEntry in a hash, as postgres_fdw's ConnCacheEntry),
 *	  and a pointer to the one in use, that of the current user's mapping.
 *
 * Opened on first need with PQconnectStartParams + PQconnectPoll under
 * claims_cell.connect_timeout; every statement then runs under a deadline
 * of claims_cell.call_timeout. Every wait is a WaitLatchOrSocket loop
 * that answers cancel and terminate: raised when the caller allows it,
 * else (the commit and abort callbacks) the call gives up. A connection
 * is never cancelled with the blocking PQcancel(): it is closed, and the
 * store's session, which checks its client every second
 * (client_connection_check_interval), ends the statement it was running.
 * A call that fails to connect, loses its connection or misses its
 * deadline is tried once more, within the one admission of the circuit
 * breaker; a call that finishes a lease is never refused by it.
 *
 * A server may list several hosts (host 'n1,n2,n3', with
 * target_session_attrs 'read-write'): they are tried one by one, starting
 * with the host that last accepted a session in this database, each for
 * at most the server's connect_timeout (seconds; without it
 * claims_cell.connect_timeout shared among the hosts), all within the
 * call's own deadline. A host a connection failed on is counted in shared
 * memory, and every backend drops its connection to that host before its
 * next call instead of finding out with a failed call of its own. Options are read in a transaction
 * (cell_conn_prepare) and kept, so the calls after the local commit need
 * no catalog access. ALTER SERVER / USER MAPPING mark every connection
 * stale: its next use reads the options again and opens a new one.
 *
 * Host names are resolved by libpq inside PQconnectStartParams, before any
 * deadline applies: give the store's address as hostaddr to keep a slow
 * name server out of COMMIT.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "foreign/foreign.h"
#include "libpq-fe.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "common/hashfn.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

/*
 * One connection to the store per user mapping, as postgres_fdw's
 * ConnCacheEntry: kept for when its users call again, so a backend whose
 * roles take turns does not reconnect at every turn. The password rule is
 * part of the key, so a connection a superuser opened without a password
 * never serves a role that needs one.
 */
typedef struct CellConnKey
{
	Oid			umid;			/* InvalidOid: options a worker cycle published */
	bool		need_password;	/* see cell_conn_options */
} CellConnKey;

typedef struct CellConnEntry
{
	CellConnKey key;			/* hash key (must be first) */
	Oid			server;
	PGconn	   *conn;			/* NULL: not connected */
	char	  **keywords;		/* libpq options (TopMemoryContext); NULL: none */
	char	  **values;
	char	   *schema;			/* quoted schema of the store's functions */
	char	   *label;			/* host:port/dbname for messages */
	uint32		host;			/* key of the connected host; 0: none */
	uint32		host_seen;		/* its failure count when connected */
	bool		stale;			/* a server or user mapping changed since its
								 * options were read */
} CellConnEntry;

static HTAB *cell_conn_hash = NULL;

/* The connection in use: that of the current user's mapping; NULL: none. */
static CellConnEntry *cell_cur = NULL;
static Oid	cell_cur_user = InvalidOid; /* the user it was chosen for */

/* Servers and user mappings changed so far (syscache callbacks). */
static uint64 cell_conn_invalidations = 0;

/*
 * An error (an interrupt) ended a call, and the abort it raised has not
 * finished its callbacks yet.
 */
static bool cell_call_interrupted = false;

/* How often the store's session looks for its client gone (PostgreSQL 14+). */
#define CELL_STORE_CLIENT_CHECK "1s"

static void cell_conn_set_options(CellConnEntry *e, List *kw, List *vals);

/* Syscache callback: a server or user mapping changed. */
static void
cell_conn_invalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	HASH_SEQ_STATUS seq;
	CellConnEntry *e;

	cell_conn_invalidations++;
	if (cell_conn_hash == NULL)
		return;
	hash_seq_init(&seq, cell_conn_hash);
	while ((e = hash_seq_search(&seq)) != NULL)
		e->stale = true;
}

/* Free a set of libpq options (TopMemoryContext). */
static void
cell_free_options(char **keywords, char **values)
{
	if (keywords == NULL)
		return;
	for (int i = 0; keywords[i]; i++)
	{
		pfree(keywords[i]);
		pfree(values[i]);
	}
	pfree(keywords);
	pfree(values);
}

/*
 * Close an entry's connection (after a timeout, a failure or a change). A
 * statement still running at the store is not cancelled: PQcancel() opens
 * a connection of its own and waits for the store's answer without a
 * bound, so a stalled store would hold COMMIT. The store's session notices
 * the closed socket within CELL_STORE_CLIENT_CHECK and ends the statement.
 * The socket is non-blocking once connected: PQfinish's goodbye message
 * cannot block either.
 */
static void
cell_conn_disconnect(CellConnEntry *e)
{
	if (e->conn)
		PQfinish(e->conn);
	e->conn = NULL;
	e->host = 0;
	if (e->schema)
		pfree(e->schema);
	e->schema = NULL;
}

/* Close the connection in use, keeping its options. */
static void
cell_conn_discard(void)
{
	if (cell_cur != NULL)
		cell_conn_disconnect(cell_cur);
}

/* Close an entry's connection and free what it holds (it stays in the hash). */
static void
cell_conn_close_entry(CellConnEntry *e)
{
	cell_conn_disconnect(e);
	cell_free_options(e->keywords, e->values);
	e->keywords = e->values = NULL;
	if (e->label)
		pfree(e->label);
	e->label = NULL;
}

/*
 * Stop using the current connection: kept in the hash for its user
 * mapping, unless it has none, is stale, or is not connected; then it is
 * closed and forgotten.
 */
static void
cell_conn_leave(bool stale)
{
	CellConnEntry *e = cell_cur;

	cell_cur = NULL;
	if (e == NULL)
		return;
	if (!OidIsValid(e->key.umid) || stale || e->conn == NULL)
	{
		cell_conn_close_entry(e);
		hash_search(cell_conn_hash, &e->key, HASH_REMOVE, NULL);
		return;
	}
	e->stale = false;
}

/*
 * The entry of a user mapping, as GetConnection finds postgres_fdw's: the
 * kept one when it is fresh and of this server (found), else a new one
 * without options (a stale one is closed first).
 */
static CellConnEntry *
cell_conn_entry(Oid umid, bool need_password, Oid serverid, bool *found)
{
	CellConnKey key;
	CellConnEntry *e;

	if (cell_conn_hash == NULL)
	{
		HASHCTL		ctl;

		/* in TopMemoryContext, as postgres_fdw's ConnectionHash */
		ctl.keysize = sizeof(CellConnKey);
		ctl.entrysize = sizeof(CellConnEntry);
		cell_conn_hash = hash_create("claims_cell connections", 8, &ctl, HASH_ELEM | HASH_BLOBS);
	}
	memset(&key, 0, sizeof(key));
	key.umid = umid;
	key.need_password = need_password;
	e = hash_search(cell_conn_hash, &key, HASH_ENTER, found);
	if (*found && (e->stale || e->server != serverid))
	{
		cell_conn_close_entry(e);
		*found = false;
	}
	if (!*found)
	{
		key = e->key;
		memset(e, 0, sizeof(*e));
		e->key = key;
		e->server = serverid;
	}
	return e;
}

/* Register the invalidation callbacks (once per backend). */
void
cell_conn_init(void)
{
	CacheRegisterSyscacheCallback(FOREIGNSERVEROID, cell_conn_invalidate, (Datum) 0);
	CacheRegisterSyscacheCallback(USERMAPPINGOID, cell_conn_invalidate, (Datum) 0);
}

/* Where the store is, for messages. */
char *
cell_server_label(void)
{
	return cell_cur && cell_cur->label ? cell_cur->label : "(not configured)";
}

/*
 * Read the server's and the current user's mapping options (inside a
 * transaction) unless they are current; a change closes the connection.
 */
void
cell_conn_prepare(Oid serverid)
{
	CellConnEntry *e = cell_cur;
	List	   *kw;
	List	   *vals;
	bool		need_password;
	bool		stale;
	bool		found;
	uint64		seen = cell_conn_invalidations;
	Oid			umid;

	if (e != NULL && !e->stale && serverid == e->server && GetUserId() == cell_cur_user)
		return;
	/* an invalidation that arrives while the options are read marks them stale again */
	stale = e == NULL || e->stale;
	if (e != NULL)
		e->stale = false;
	cell_conn_options(serverid, GetUserId(), &kw, &vals, &need_password);
	umid = GetUserMapping(GetUserId(), serverid)->umid;
	if (e != NULL && !stale && serverid == e->server && umid == e->key.umid &&
		need_password == e->key.need_password)
	{
		/* another user of the same mapping (PUBLIC): the same connection */
		cell_cur_user = GetUserId();
		return;
	}
	cell_conn_leave(stale);
	e = cell_conn_entry(umid, need_password, serverid, &found);
	if (!found)
		cell_conn_set_options(e, kw, vals);
	e->stale = cell_conn_invalidations != seen;
	cell_cur = e;
	cell_cur_user = GetUserId();
}

/*
 * Give an entry these libpq options (closing its connection), with the
 * application name and client encoding added.
 */
static void
cell_conn_set_options(CellConnEntry *e, List *kw, List *vals)
{
	MemoryContext old;
	int			n;
	int			i = 0;
	ListCell   *lk,
			   *lv;
	const char *host = "";
	const char *port = "";
	const char *dbname = "";

	cell_conn_disconnect(e);
	old = MemoryContextSwitchTo(TopMemoryContext);
	cell_free_options(e->keywords, e->values);
	n = list_length(kw);
	e->keywords = palloc0(sizeof(char *) * (n + 3));
	e->values = palloc0(sizeof(char *) * (n + 3));
	i = 0;
	forboth(lk, kw, lv, vals)
	{
		e->keywords[i] = pstrdup(lfirst(lk));
		e->values[i] = pstrdup(lfirst(lv));
		if (strcmp(e->keywords[i], "host") == 0)
			host = e->values[i];
		else if (strcmp(e->keywords[i], "port") == 0)
			port = e->values[i];
		else if (strcmp(e->keywords[i], "dbname") == 0)
			dbname = e->values[i];
		i++;
	}
	e->keywords[i] = pstrdup("fallback_application_name");
	e->values[i] = pstrdup("claims_cell");
	i++;
	e->keywords[i] = pstrdup("client_encoding");
	e->values[i] = pstrdup(GetDatabaseEncodingName());	/* as postgres_fdw */
	if (e->label)
		pfree(e->label);
	e->label = psprintf("%s:%s/%s", host, port, dbname);
	MemoryContextSwitchTo(old);
}

/*
 * Use the options a worker cycle published ("k\0v\0...\0"; empty: none),
 * for a process that cannot read the catalogs: an entry of no user
 * mapping, in place of the connection in use.
 */
void
cell_conn_load_options(const char *packed)
{
	List	   *kw = NIL;
	List	   *vals = NIL;
	CellConnEntry *e;
	bool		found;

	while (*packed)
	{
		const char *k = packed;
		const char *v = k + strlen(k) + 1;

		kw = lappend(kw, pstrdup(k));
		vals = lappend(vals, pstrdup(v));
		packed = v + strlen(v) + 1;
	}
	cell_conn_leave(true);
	/* the launcher, as the bootstrap superuser: no password required */
	e = cell_conn_entry(InvalidOid, false, InvalidOid, &found);
	cell_conn_set_options(e, kw, vals);
	if (kw == NIL)
	{
		pfree(e->keywords[0]);
		e->keywords[0] = NULL;	/* nothing to connect to */
	}
	e->stale = false;
	cell_cur = e;
}

/* The socket of the open connection, or PGINVALID_SOCKET. */
pgsocket
cell_conn_socket(void)
{
	if (cell_cur == NULL || cell_cur->conn == NULL || PQstatus(cell_cur->conn) != CONNECTION_OK)
		return PGINVALID_SOCKET;
	return PQsocket(cell_cur->conn);
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

	if (cell_cur == NULL || cell_cur->conn == NULL)
		return false;
	if (!PQconsumeInput(cell_cur->conn))
	{
		ereport(LOG,
				(errmsg("claims_cell: the LISTEN connection to the claims store at %s was lost: %s",
						cell_server_label(), PQerrorMessage(cell_cur->conn))));
		cell_conn_discard();
		return false;
	}
	while ((n = PQnotifies(cell_cur->conn)) != NULL)
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
 * Whether a cancel or terminate request waits to be served, or the
 * postmaster is gone (the backend is about to exit).
 */
static bool
cell_interrupt_pending(void)
{
	return ProcDiePending || QueryCancelPending || !PostmasterIsAlive();
}

/*
 * Exit as every backend does when the postmaster is gone. Only a call that
 * may be interrupted exits here: a wait in the commit or abort callback
 * gives up instead, since exiting inside them would run the abort callback
 * within the exit and call proc_exit() again from it.
 */
static void
cell_exit_if_postmaster_died(bool interruptible)
{
	if (interruptible && !proc_exit_inprogress && !PostmasterIsAlive())
		ereport(FATAL,
				(errcode(ERRCODE_ADMIN_SHUTDOWN),
				 errmsg("terminating connection due to unexpected postmaster exit")));
}

/*
 * Wait until the socket is ready (CELL_CALL_OK), the deadline passes
 * (CELL_CALL_TIMEOUT) or an interrupt is pending (CELL_CALL_INTERRUPTED).
 * When the caller allows it the interrupt is raised by
 * CHECK_FOR_INTERRUPTS; otherwise (the commit and abort callbacks, where
 * interrupts are held) the wait gives up, so that cancel, statement_timeout
 * and terminate are answered at once and served when the callback returns.
 */
static CellCallStatus
cell_wait(PGconn *conn, bool for_write, TimestampTz deadline, bool interruptible)
{
	for (;;)
	{
		long		ms;
		int			rc;

		if (interruptible)
			CHECK_FOR_INTERRUPTS();
		cell_exit_if_postmaster_died(interruptible);
		if (cell_interrupt_pending())
			return CELL_CALL_INTERRUPTED;
		ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (ms <= 0)
			return CELL_CALL_TIMEOUT;
		rc = WaitLatchOrSocket(MyLatch,
							   WL_LATCH_SET | WL_TIMEOUT | WL_POSTMASTER_DEATH |
							   (for_write ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE),
							   PQsocket(conn), ms, PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
			ResetLatch(MyLatch);
		if (rc & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE))
			return CELL_CALL_OK;
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

/* Record a failed wait (a timeout or an interrupt) in the result. */
static CellCallStatus
cell_fail_wait(CellCallResult *r, CellCallStatus st, const char *what)
{
	if (st == CELL_CALL_INTERRUPTED && !PostmasterIsAlive())
		return cell_fail(r, st, "the postmaster exited: this backend is exiting");
	if (st == CELL_CALL_INTERRUPTED)
		return cell_fail(r, st, "interrupted by a cancel or terminate request");
	return cell_fail(r, st, what);
}

/*
 * Pass the store's notices and warnings to the server log, naming the
 * store (libpq would print them to the server's stderr).
 */
static void
cell_notice_receiver(void *arg, const PGresult *res)
{
	const char *severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *message = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	bool		warning = severity != NULL && strcmp(severity, "WARNING") == 0;

	ereport(warning ? LOG : DEBUG1,
			(errmsg("claims_cell: the claims store at %s reported %s: %s",
					cell_server_label(), severity ? severity : "NOTICE",
					message ? message : PQresultErrorMessage(res))));
}

/*
 * Open a connection to one host with these options before the deadline.
 * On failure nothing is left open.
 */
static CellCallStatus
cell_connect_host(const char *const *keywords, const char *const *values,
				  TimestampTz deadline, bool interruptible, CellCallResult *r)
{
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	CellCallStatus w = CELL_CALL_OK;

	cell_cur->conn = PQconnectStartParams(keywords, values, false);
	if (cell_cur->conn == NULL)
		return cell_fail(r, CELL_CALL_UNREACHABLE, "out of memory");
	if (PQstatus(cell_cur->conn) == CONNECTION_BAD)
		st = PGRES_POLLING_FAILED;
	else
		PQsetNoticeReceiver(cell_cur->conn, cell_notice_receiver, NULL);
	while (st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED)
	{
		w = cell_wait(cell_cur->conn, st == PGRES_POLLING_WRITING, deadline, interruptible);
		if (w != CELL_CALL_OK)
			break;
		st = PQconnectPoll(cell_cur->conn);
	}
	if (w != CELL_CALL_OK)
		cell_fail_wait(r, w, "connecting timed out");
	else if (st == PGRES_POLLING_FAILED || PQsetnonblocking(cell_cur->conn, 1) != 0)
		w = cell_fail(r, CELL_CALL_UNREACHABLE, PQerrorMessage(cell_cur->conn));
	else if (cell_cur->key.need_password && !PQconnectionUsedPassword(cell_cur->conn))
	{
		/* the store did not ask for the password: refuse, as postgres_fdw does */
		w = r->status = CELL_CALL_REMOTE_ERROR;
		strlcpy(r->sqlstate, "2F003", sizeof(r->sqlstate));
		r->message = pstrdup("password is required");
		r->detail = pstrdup("Non-superusers must connect to the claims store with a password, and the store did not ask for it.");
		r->hint = pstrdup("Make the store's authentication ask for the password, or have a superuser set password_required 'false' on the user mapping.");
	}
	if (w != CELL_CALL_OK)
	{
		PQfinish(cell_cur->conn);
		cell_cur->conn = NULL;
	}
	return w;
}

/* Split a comma-separated libpq host, hostaddr or port list. */
static List *
cell_split_list(const char *value)
{
	List	   *items = NIL;
	const char *p = value;

	for (;;)
	{
		const char *comma = strchr(p, ',');

		if (comma == NULL)
		{
			items = lappend(items, pstrdup(p));
			return items;
		}
		items = lappend(items, pnstrdup(p, comma - p));
		p = comma + 1;
	}
}

/*
 * The hosts of the options: for each, the options to connect to it alone
 * (host, hostaddr and port taken from the lists, connect_timeout left out:
 * libpq ignores it in non-blocking connections) and its key, a hash of its
 * address. Lists whose lengths do not match are passed to libpq as they
 * are, as one host. *per_host_ms is each host's bound: the server's
 * connect_timeout, else claims_cell.connect_timeout shared among several
 * hosts, else 0 (none but the call's).
 */
static int
cell_hosts(char ****kw_out, char ****val_out, uint32 **keys_out, int *per_host_ms)
{
	List	   *lists[3] = {NIL, NIL, NIL};
	static const char *const names[3] = {"host", "hostaddr", "port"};
	int			n = 1;
	int			nopts = 0;
	bool		split = true;
	char	 ***kw;
	char	 ***val;
	uint32	   *keys;

	*per_host_ms = 0;
	for (int i = 0; cell_cur->keywords[i]; i++)
	{
		nopts++;
		if (strcmp(cell_cur->keywords[i], "connect_timeout") == 0)
			*per_host_ms = (int) Min(strtol(cell_cur->values[i], NULL, 10), 3600) * 1000;
		for (int j = 0; j < 3; j++)
			if (strcmp(cell_cur->keywords[i], names[j]) == 0)
				lists[j] = cell_split_list(cell_cur->values[i]);
	}
	n = Max(list_length(lists[0]), list_length(lists[1]));
	n = Max(n, 1);
	for (int j = 0; j < 3; j++)
		if (lists[j] != NIL && list_length(lists[j]) != n &&
			!(j == 2 && list_length(lists[j]) == 1))
			split = false;
	if (!split)
		n = 1;
	if (*per_host_ms <= 0)
		*per_host_ms = n > 1 ? cell_connect_timeout_ms / n : 0;
	kw = palloc0(sizeof(char **) * n);
	val = palloc0(sizeof(char **) * n);
	keys = palloc0(sizeof(uint32) * n);
	for (int h = 0; h < n; h++)
	{
		StringInfoData addr;
		int			k = 0;

		initStringInfo(&addr);
		kw[h] = palloc0(sizeof(char *) * (nopts + 1));
		val[h] = palloc0(sizeof(char *) * (nopts + 1));
		for (int i = 0; cell_cur->keywords[i]; i++)
		{
			const char *v = cell_cur->values[i];
			int			j;

			if (strcmp(cell_cur->keywords[i], "connect_timeout") == 0)
				continue;
			for (j = 0; j < 3; j++)
				if (strcmp(cell_cur->keywords[i], names[j]) == 0)
					break;
			if (j < 3 && split)
				v = list_nth(lists[j], list_length(lists[j]) == 1 ? 0 : h);
			if (j < 3)
				appendStringInfo(&addr, "%s=%s;", names[j], v);
			kw[h][k] = cell_cur->keywords[i];
			val[h][k] = (char *) v;
			k++;
		}
		keys[h] = hash_bytes((unsigned char *) addr.data, addr.len);
		if (keys[h] == 0)
			keys[h] = 1;
		pfree(addr.data);
	}
	*kw_out = kw;
	*val_out = val;
	*keys_out = keys;
	return n;
}

/*
 * Open the connection before the deadline: each host in turn, starting
 * with the one that last accepted a session in this database, each for at
 * most its own bound. A host that refuses, is read-only where read-write
 * is asked for, or does not answer within its bound while time for
 * another host remains is counted as failed in shared memory.
 */
static CellCallStatus
cell_connect_hosts(char ***kw, char ***val, uint32 *keys, int n, int per_host_ms,
				   TimestampTz deadline, bool interruptible, CellCallResult *r)
{
	int			first = 0;
	uint32		preferred;
	StringInfoData errors;
	CellCallStatus st = CELL_CALL_UNREACHABLE;

	preferred = cell_host_preferred();
	for (int h = 0; h < n; h++)
		if (keys[h] == preferred)
			first = h;
	initStringInfo(&errors);
	for (int k = 0; k < n; k++)
	{
		int			h = (first + k) % n;
		TimestampTz host_deadline = deadline;

		if (per_host_ms > 0)
			host_deadline = Min(deadline,
								TimestampTzPlusMilliseconds(GetCurrentTimestamp(), per_host_ms));
		st = cell_connect_host((const char *const *) kw[h], (const char *const *) val[h],
							   host_deadline, interruptible, r);
		if (st == CELL_CALL_OK)
		{
			cell_cur->host = keys[h];
			cell_cur->host_seen = cell_host_failures(keys[h]);
			cell_host_accepted(keys[h]);
			return st;
		}
		if (st == CELL_CALL_INTERRUPTED || st == CELL_CALL_REMOTE_ERROR)
			return st;
		if (st == CELL_CALL_TIMEOUT && host_deadline >= deadline)
			break;				/* the call's deadline passed */
		if (n > 1)
			cell_host_failed(keys[h]);
		appendStringInfo(&errors, "%s%s", errors.len ? "; " : "", r->message);
	}
	if (errors.len == 0)
		return st;
	if (st == CELL_CALL_TIMEOUT)
		appendStringInfo(&errors, "; %s", r->message);
	return cell_fail(r, st, errors.data);
}

/*
 * Open the connection before the deadline (see cell_connect_hosts); the
 * per-host options live in a context of their own, freed on return.
 */
static CellCallStatus
cell_connect(TimestampTz deadline, bool interruptible, CellCallResult *r)
{
	MemoryContext hosts_cxt;
	MemoryContext old;
	char	 ***kw;
	char	 ***val;
	uint32	   *keys;
	int			per_host_ms;
	int			n;
	CellCallStatus st;

	if (cell_cur == NULL || cell_cur->keywords == NULL)
		return cell_fail(r, CELL_CALL_UNREACHABLE, "the claims store is not configured");
	hosts_cxt = AllocSetContextCreate(CurrentMemoryContext, "claims_cell hosts",
									  ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(hosts_cxt);
	n = cell_hosts(&kw, &val, &keys, &per_host_ms);
	MemoryContextSwitchTo(old);
	st = cell_connect_hosts(kw, val, keys, n, per_host_ms, deadline, interruptible, r);
	MemoryContextDelete(hosts_cxt);
	return st;
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
	CellCallStatus w;

	if (!PQsendQueryParams(cell_cur->conn, sql, nparams, NULL, params, NULL, NULL, 0))
		return cell_fail(r, CELL_CALL_UNREACHABLE, PQerrorMessage(cell_cur->conn));
	r->sent = true;
	while ((flushed = PQflush(cell_cur->conn)) == 1)
	{
		w = cell_wait(cell_cur->conn, true, deadline, interruptible);
		if (w != CELL_CALL_OK)
			return cell_fail_wait(r, w, "sending timed out");
	}
	if (flushed < 0)
		return cell_fail(r, CELL_CALL_UNREACHABLE, PQerrorMessage(cell_cur->conn));
	/* an interrupt in cell_wait must not leak the result held in last */
	PG_TRY();
	{
		for (;;)
		{
			while (PQisBusy(cell_cur->conn))
			{
				w = cell_wait(cell_cur->conn, false, deadline, interruptible);
				if (w != CELL_CALL_OK)
				{
					PQclear(last);
					last = NULL;
					status = cell_fail_wait(r, w, "no answer before the deadline");
					break;
				}
				if (!PQconsumeInput(cell_cur->conn))
				{
					PQclear(last);
					last = NULL;
					status = cell_fail(r, CELL_CALL_UNREACHABLE, PQerrorMessage(cell_cur->conn));
					break;
				}
			}
			if (status != CELL_CALL_OK)
				break;
			res = PQgetResult(cell_cur->conn);
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
	if (last == NULL || PQstatus(cell_cur->conn) == CONNECTION_BAD)
	{
		PQclear(last);
		return cell_fail(r, CELL_CALL_UNREACHABLE, PQerrorMessage(cell_cur->conn));
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
		r->message = pstrdup(f ? f : PQerrorMessage(cell_cur->conn));
		f = PQresultErrorField(last, PG_DIAG_MESSAGE_DETAIL);
		r->detail = f ? pstrdup(f) : NULL;
		f = PQresultErrorField(last, PG_DIAG_MESSAGE_HINT);
		r->hint = f ? pstrdup(f) : NULL;
	}
	PQclear(last);
	return r->status;
}

/* Whether sqlstate is one of list's codes (five characters each, one space between). */
static bool
cell_sqlstate_in(const char *sqlstate, const char *list)
{
	if (strlen(sqlstate) != 5)
		return false;
	for (const char *p = list; *p != '\0'; p += (p[5] == ' ' ? 6 : 5))
		if (strncmp(p, sqlstate, 5) == 0)
			return true;
	return false;
}

/*
 * One session setting of a fresh connection's setup, a plain SET (no
 * function privilege needed; it outranks the store's configuration files
 * and their reloads). The remote errors "tolerated" (SQLSTATEs separated
 * by spaces; NULL: any) are not the setup's failure and leave the session
 * as it was; any other fails the setup, which the next call then runs
 * again. r->sent stays as it was.
 */
static CellCallStatus
cell_session_set(const char *sql, const char *tolerated, bool sent, TimestampTz deadline,
				 bool interruptible, CellCallResult *r)
{
	CellCallStatus st = cell_exec(sql, 0, NULL, deadline, interruptible, r);

	r->sent = sent;
	if (st != CELL_CALL_OK && st != CELL_CALL_REMOTE_ERROR)
		return st;
	if (st == CELL_CALL_REMOTE_ERROR && tolerated != NULL &&
		!cell_sqlstate_in(r->sqlstate, tolerated))
		return st;
	memset(r->sqlstate, 0, sizeof(r->sqlstate));
	r->message = r->detail = r->hint = NULL;
	r->status = CELL_CALL_OK;
	return CELL_CALL_OK;
}

/*
 * Set up a fresh connection: find the schema of the store's extension, have
 * the session answer in the compat JSON mapping (snake_case names, every
 * field: what the cell parses) whatever claims.json_output the store's
 * role, database or configuration sets for other clients (a store without
 * the setting knows no other mapping and refuses its name: 42704, or 42602
 * once its library reserved the claims prefix), and have the
 * store's session look for a closed socket while it runs a statement
 * (PostgreSQL 14+), so that a statement this backend gave up on ends at the
 * store too (refused on platforms without the check; the connection is used
 * anyway). The setup's statements are not the call's: they leave r->sent as
 * it was.
 */
static CellCallStatus
cell_find_schema(TimestampTz deadline, bool interruptible, CellCallResult *r)
{
	CellCallStatus st;
	char	   *quoted;
	bool		sent = r->sent;

	st = cell_exec("SELECT n.nspname FROM pg_catalog.pg_extension e"
				   " JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace"
				   " WHERE e.extname = 'claims'", 0, NULL, deadline, interruptible, r);
	r->sent = sent;
	if (st != CELL_CALL_OK)
		return st;
	if (r->value == NULL)
	{
		r->status = CELL_CALL_REMOTE_ERROR;
		strlcpy(r->sqlstate, "42704", sizeof(r->sqlstate));
		r->message = pstrdup("extension \"claims\" is not installed in the store's database");
		return r->status;
	}
	quoted = PQescapeIdentifier(cell_cur->conn, r->value, strlen(r->value));
	if (quoted == NULL)
		return cell_fail(r, CELL_CALL_UNREACHABLE, PQerrorMessage(cell_cur->conn));
	/* a store older than the setting: 42704, or 42602 where its prefix is reserved */
	st = cell_session_set("SET claims.json_output = compat", "42704 42602", sent, deadline, interruptible, r);
	if (st == CELL_CALL_OK && PQserverVersion(cell_cur->conn) >= 140000)
		st = cell_session_set("SET client_connection_check_interval = '" CELL_STORE_CLIENT_CHECK "'",
							  NULL, sent, deadline, interruptible, r);
	if (st != CELL_CALL_OK)
	{
		PQfreemem(quoted);
		return st;
	}
	cell_cur->schema = MemoryContextStrdup(TopMemoryContext, quoted);
	PQfreemem(quoted);
	r->status = CELL_CALL_OK;
	r->value = NULL;
	return CELL_CALL_OK;
}

/* sql with every "%s" replaced by the store's quoted schema (not a format). */
static char *
cell_sql_in_schema(const char *sql)
{
	StringInfoData buf;
	const char *p;

	initStringInfo(&buf);
	while ((p = strstr(sql, "%s")) != NULL)
	{
		appendBinaryStringInfo(&buf, sql, p - sql);
		appendStringInfoString(&buf, cell_cur->schema);
		sql = p + 2;
	}
	appendStringInfoString(&buf, sql);
	return buf.data;
}

/* The quoted schema of the store's functions (after a successful call). */
const char *
cell_store_schema(void)
{
	return cell_cur ? cell_cur->schema : NULL;
}

/*
 * One try of a call: connect and set up if needed, under
 * claims_cell.connect_timeout (r->connecting says a failure happened
 * there), then run the statement under claims_cell.call_timeout. A fresh
 * backend's first call does not spend the statement's deadline on the
 * connection. The commit and abort callbacks (not interruptible) find the
 * connection their transaction's first call opened; they connect only
 * after a failure, and then for no longer than call_timeout, since the
 * session waits in COMMIT or ROLLBACK and recovery finishes the lease.
 */
static CellCallStatus
cell_try(const char *sql, int nparams, const char *const *params,
		 bool interruptible, CellCallResult *r)
{
	CellConnEntry *e = cell_cur;
	CellCallStatus st;
	char	   *full;
	TimestampTz deadline;

	/* a call ended by FATAL left its command running: start afresh */
	if (e != NULL && e->conn != NULL && PQtransactionStatus(e->conn) == PQTRANS_ACTIVE)
		cell_conn_discard();
	/* a connection of another backend to this host failed since: move on */
	if (e != NULL && e->conn != NULL && e->host != 0 &&
		cell_host_failures(e->host) != e->host_seen)
	{
		ereport(DEBUG1,
				(errmsg("claims_cell: dropping the connection to a claims store host that failed since it was opened")));
		cell_conn_discard();
	}
	r->connecting = e == NULL || e->conn == NULL || e->schema == NULL;
	if (r->connecting)
	{
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											   interruptible ? cell_connect_timeout_ms :
											   Min(cell_connect_timeout_ms, cell_call_timeout_ms));
		if ((e == NULL || e->conn == NULL) &&
			(st = cell_connect(deadline, interruptible, r)) != CELL_CALL_OK)
			return st;
		if ((st = cell_find_schema(deadline, interruptible, r)) != CELL_CALL_OK)
			return st;
		r->connecting = false;
	}
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), cell_call_timeout_ms);
	full = cell_sql_in_schema(sql);
	return cell_exec(full, nparams, params, deadline, interruptible, r);
}

/*
 * One try admitted by the circuit breaker: an error (an interrupt) discards
 * the connection, gives the admission back and makes the calls of the
 * abort callbacks give up at once before it is raised. A function of its
 * own, so that no local of the caller's retry loop lives across the setjmp
 * (gcc 14 reports the loop counter as clobbered).
 */
static CellCallStatus
cell_try_admitted(const char *sql, int nparams, const char *const *params,
				  bool interruptible, bool probe, CellCallResult *r)
{
	CellCallStatus st;

	PG_TRY();
	{
		st = cell_try(sql, nparams, params, interruptible, r);
	}
	PG_CATCH();
	{
		cell_conn_discard();
		cell_breaker_leave(-1, probe, 0);
		cell_call_interrupted = true;
		PG_RE_THROW();
	}
	PG_END_TRY();
	return st;
}

/*
 * The abort that an interrupted call raised has run its callbacks: the
 * calls after it (a savepoint's rollback, the COMMIT of a transaction that
 * caught the error) are tried again. A cancel belongs to the call it
 * interrupted, not to the rest of the session.
 */
void
cell_call_abort_ended(void)
{
	cell_call_interrupted = false;
}

/*
 * The body of cell_call and cell_call_finish. A call that may not wait (the
 * commit and abort callbacks) gives up at once while a cancel or terminate
 * request is pending, or while the abort an interrupted call raised runs
 * its callbacks (cell_call_abort_ended): the aborting (sub)transaction's
 * rollbacks are then left to the worker or to recovery rather than holding
 * the backend for their deadlines.
 */
static void
cell_call_internal(const char *sql, int nparams, const char *const *params,
				   bool interruptible, bool finishing, CellCallResult *r)
{
	bool		probe;
	CellCallStatus st;
	TimestampTz start;

	memset(r, 0, sizeof(*r));
	if (interruptible)
		cell_call_interrupted = false;
	else if (cell_call_interrupted || cell_interrupt_pending())
	{
		cell_fail(r, CELL_CALL_INTERRUPTED, !PostmasterIsAlive()
				  ? "not tried: the postmaster exited"
				  : "not tried: a cancel or terminate request interrupted this backend's calls");
		return;
	}
	st = cell_breaker_enter(&probe, finishing);
	if (st != CELL_CALL_OK)
	{
		cell_fail(r, st, st == CELL_CALL_BUSY
				  ? "too many calls to the claims store are in flight"
				  : "the circuit breaker is open");
		return;
	}
	start = GetCurrentTimestamp();
	for (int attempt = 1; attempt <= 2; attempt++)
	{
		r->tries = attempt;
		cell_stats_count(CELL_STAT_CALLS);
		st = cell_try_admitted(sql, nparams, params, interruptible, probe, r);

		if (st == CELL_CALL_OK || st == CELL_CALL_REMOTE_ERROR)
		{
			cell_breaker_leave(finishing ? 2 : 1, probe,
							   (double) (GetCurrentTimestamp() - start) / 1000.0);
			return;
		}
		/* a request abandoned by this try may still be done at the store */
		if (r->sent)
			r->abandoned = true;
		/* an open connection was lost: every backend leaves that host */
		if (st == CELL_CALL_UNREACHABLE && cell_cur != NULL && cell_cur->conn != NULL &&
			cell_cur->host != 0)
			cell_host_failed(cell_cur->host);
		cell_conn_discard();
		ereport(LOG,
				(errmsg("claims_cell: call %d of 2 to the claims store at %s failed: %s",
						attempt, cell_server_label(), r->message)));
		if (st == CELL_CALL_INTERRUPTED || (st == CELL_CALL_TIMEOUT && r->connecting))
		{
			/*
			 * Neither says the store is down: an interrupt is the caller's, and
			 * a slow connection (a burst of new backends) must not open the
			 * breaker for everyone. A refused connection does count. Neither
			 * is tried again: the wait was already long.
			 */
			cell_breaker_leave(-1, probe, 0);
			if (st == CELL_CALL_TIMEOUT)
				cell_stats_count(CELL_STAT_TIMEOUTS);
			return;
		}
		cell_stats_count(st == CELL_CALL_TIMEOUT ? CELL_STAT_TIMEOUTS : CELL_STAT_FAILURES);
	}
	/* only a call whose second try failed too counts towards the breaker */
	cell_breaker_leave(finishing ? -1 : 0, probe, 0);
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
	cell_call_internal(sql, nparams, params, interruptible, false, r);
}

/*
 * Call the store to finish a lease already taken (claims_commit,
 * claims_rollback): as cell_call, but neither a full
 * claims_cell.max_concurrent_calls nor an open circuit breaker refuses it,
 * and its outcome neither opens nor closes the breaker. Admission control
 * is for new leases; refusing a finish would leave a committed or aborted
 * transaction's values leased until stale_after.
 */
void
cell_call_finish(const char *sql, int nparams, const char *const *params,
				 bool interruptible, CellCallResult *r)
{
	cell_call_internal(sql, nparams, params, interruptible, true, r);
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
			if (r->connecting)
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("could not connect to the claims store at %s within claims_cell.connect_timeout (%d ms)",
								cell_server_label(), cell_connect_timeout_ms),
						 errdetail("%d tries: %s.", r->tries, r->message),
						 errhint("Nothing was claimed; retry later.")));
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
 * One page of a store listing function (claims_list_records, ...) called
 * with request, as the text the store answered. Raises what the store
 * raises (what: the message's start), 08006 when it cannot be reached.
 */
char *
cell_call_listing_text(const char *server, Datum request, const char *function, const char *what)
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
	return r.value;
}

/* The same page as jsonb. */
Datum
cell_call_listing(const char *server, Datum request, const char *function, const char *what)
{
	return DirectFunctionCall1(jsonb_in,
							   CStringGetDatum(cell_call_listing_text(server, request, function, what)));
}
