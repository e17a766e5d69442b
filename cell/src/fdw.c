/*-------------------------------------------------------------------------
 *
 * fdw.c
 *	  The claims_cell_store foreign-data wrapper: it only holds the libpq
 *	  options of the store (server) and of the cell's login (user mapping),
 *	  as dblink_fdw does, so credentials never sit in a readable setting.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "access/reloptions.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(claims_cell_store_validator);

/* Options that belong to the user mapping (the cell's identity). */
static const char *const cell_user_options[] = {
	"user", "password", "sslpassword", "sslcert", "sslkey", "sslrootcert", "sslcrl",
	"sslcrldir", NULL
};

/* libpq options nobody may set: the extension controls them. */
static const char *const cell_forbidden_options[] = {
	"replication", "client_encoding", "fallback_application_name", "passfile",
	"service", NULL
};

static bool
cell_in_list(const char *name, const char *const *list)
{
	for (int i = 0; list[i]; i++)
		if (strcmp(name, list[i]) == 0)
			return true;
	return false;
}

/* Whether libpq knows the option and it is not a debug option. */
static bool
cell_is_libpq_option(const char *name)
{
	static PQconninfoOption *defaults = NULL;

	if (defaults == NULL)
	{
		defaults = PQconndefaults();
		if (defaults == NULL)
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	}
	for (PQconninfoOption *o = defaults; o->keyword; o++)
		if (strcmp(o->keyword, name) == 0)
			return strchr(o->dispchar, 'D') == NULL;
	return false;
}

/* Whether an option may appear on the given catalog. */
static bool
cell_option_allowed(const char *name, Oid catalog)
{
	if (!cell_is_libpq_option(name) || cell_in_list(name, cell_forbidden_options))
		return false;
	if (catalog == UserMappingRelationId)
		return cell_in_list(name, cell_user_options);
	if (catalog == ForeignServerRelationId)
		return !cell_in_list(name, cell_user_options);
	return false;
}

/*
 * Validator of claims_cell_store: servers take libpq connection options,
 * user mappings the login and TLS client options; the wrapper takes none.
 */
Datum
claims_cell_store_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));
	Oid			catalog = PG_GETARG_OID(1);
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		/* as postgres_fdw's: only a superuser may let a role log in without a password */
		if (catalog == UserMappingRelationId && strcmp(def->defname, "password_required") == 0)
		{
			if (!defGetBoolean(def) && !superuser())
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("password_required=false is superuser-only"),
						 errhint("User mappings with the password_required option set to false may only be created or modified by the superuser.")));
			continue;
		}
		if (catalog == ForeignServerRelationId && strcmp(def->defname, "connect_timeout") == 0)
		{
			char	   *end;
			long		seconds = strtol(defGetString(def), &end, 10);

			if (*defGetString(def) == '\0' || *end != '\0' || seconds < 0 || seconds > 3600)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"connect_timeout\": \"%s\"",
								defGetString(def)),
						 errhint("Give the bound of one host's connection attempt in whole seconds, from 0 (none) to 3600.")));
			continue;
		}
		if (!cell_option_allowed(def->defname, catalog))
		{
			StringInfoData valid;
			PQconninfoOption *defaults = PQconndefaults();

			initStringInfo(&valid);
			for (PQconninfoOption *o = defaults; o && o->keyword; o++)
			{
				if (strchr(o->dispchar, 'D') == NULL &&
					cell_option_allowed(o->keyword, catalog))
					appendStringInfo(&valid, "%s%s", valid.len ? ", " : "", o->keyword);
			}
			if (defaults)
				PQconninfoFree(defaults);
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\" for %s", def->defname,
							catalog == UserMappingRelationId ? "a user mapping of claims_cell_store" :
							catalog == ForeignServerRelationId ? "a server of claims_cell_store" :
							"the foreign-data wrapper claims_cell_store"),
					 valid.len > 0
					 ? errhint("Valid options in this context are: %s.", valid.data)
					 : errhint("There are no valid options in this context.")));
		}
	}
	PG_RETURN_VOID();
}

/*
 * The oid of a server of the claims_cell_store wrapper, or InvalidOid when
 * missing_ok and it does not exist.
 */
Oid
cell_server_oid(const char *server_name, bool missing_ok)
{
	ForeignServer *server = GetForeignServerByName(server_name, missing_ok);
	ForeignDataWrapper *fdw;

	if (server == NULL)
		return InvalidOid;
	fdw = GetForeignDataWrapper(server->fdwid);
	if (strcmp(fdw->fdwname, "claims_cell_store") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("server \"%s\" does not use the foreign-data wrapper claims_cell_store",
						server_name),
				 errhint("Create it with CREATE SERVER ... FOREIGN DATA WRAPPER claims_cell_store.")));
	return server->serverid;
}

/*
 * The libpq keywords and values of a server and the user mapping of a user
 * (or PUBLIC): server options first, then the mapping's. *need_password
 * says whether the connection must authenticate with a password: for a
 * user who is not a superuser, unless a superuser set password_required
 * 'false' on the mapping, as postgres_fdw requires. Otherwise such a user
 * could make the cell's sessions log in as whatever the store trusts the
 * cell's server as (peer or trust authentication), a store superuser
 * included. A mapping that requires a password and has none raises 2F003.
 */
void
cell_conn_options(Oid serverid, Oid userid, List **keywords, List **values, bool *need_password)
{
	ForeignServer *server = GetForeignServer(serverid);
	UserMapping *um = GetUserMapping(userid, serverid);
	List	   *all = list_concat(list_copy(server->options), um->options);
	bool		required = true;
	bool		has_password = false;
	ListCell   *lc;

	*keywords = NIL;
	*values = NIL;
	foreach(lc, all)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, "password_required") == 0)
		{
			required = defGetBoolean(def);
			continue;
		}
		if (strcmp(def->defname, "password") == 0 && defGetString(def)[0] != '\0')
			has_password = true;
		*keywords = lappend(*keywords, def->defname);
		*values = lappend(*values, defGetString(def));
	}
	*need_password = required && !superuser_arg(userid);
	if (*need_password && !has_password)
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("Non-superusers must provide a password in the user mapping of the claims store server \"%s\".",
						   server->servername),
				 errhint("Give the user mapping a password, or have a superuser set password_required 'false' on it (for certificate authentication).")));
}
