/* claims_cell--1.3--1.4.sql: the cell side hardened. */

\echo Use "ALTER EXTENSION claims_cell UPDATE TO '1.4'" to load this file. \quit

-- The administrator functions written in C run their SQL under a pinned
-- search path, as the PL/pgSQL ones do: a name the caller's path resolves
-- (an operator planted in public by a database owner) must never run with
-- a superuser's privileges.
ALTER FUNCTION @extschema@.configure(name, bigint) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.claim_column(regclass, name, text, text, name, text)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.set_claiming(regclass, name, boolean) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.unclaim_column(regclass, name) SET search_path = pg_catalog, pg_temp;
