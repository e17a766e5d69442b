--
-- The cell side's current shape in one place: the extension's member
-- objects, the settings, comment and privileges of each function, and every
-- relation as \d+ shows it, from a fresh install in a database of its own
-- (the other tests change the extension's tables). A change to the schema
-- changes this file; the upgrade test (test/t/009_upgrade.pl) shows that an
-- updated cell has the same shape.
--
CREATE DATABASE claims_cell_catalog;
\c claims_cell_catalog
CREATE EXTENSION claims_cell;

SELECT pg_describe_object(d.classid, d.objid, d.objsubid) AS member
  FROM pg_depend d
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'claims_cell')
 ORDER BY 1;

-- Privileges are shown without the owner's (whoever ran CREATE EXTENSION).
SELECT p.oid::regprocedure AS function,
       p.prosecdef AS security_definer,
       array_to_string(p.proconfig, ', ') AS settings,
       (SELECT string_agg(g, ', ' ORDER BY g)
          FROM (SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                       || ' ' || a.privilege_type AS g
                  FROM aclexplode(coalesce(p.proacl, acldefault('f'::"char", p.proowner))) a
                 WHERE a.grantee <> p.proowner) s) AS granted,
       obj_description(p.oid, 'pg_proc') AS comment
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'claims_cell')
 ORDER BY p.oid::regprocedure::text;

SELECT c.oid::regclass AS relation,
       (SELECT string_agg(g, ', ' ORDER BY g)
          FROM (SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                       || ' ' || a.privilege_type AS g
                  FROM aclexplode(coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char", c.relowner))) a
                 WHERE a.grantee <> c.relowner) s) AS granted
  FROM pg_class c
  JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'claims_cell')
 ORDER BY c.oid::regclass::text;

SELECT n.nspname AS schema,
       (SELECT string_agg(g, ', ' ORDER BY g)
          FROM (SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                       || ' ' || a.privilege_type AS g
                  FROM aclexplode(coalesce(n.nspacl, acldefault('n'::"char", n.nspowner))) a
                 WHERE a.grantee <> n.nspowner) s) AS granted
  FROM pg_namespace n WHERE n.nspname = 'claims_cell';

SELECT unnest(extconfig)::regclass AS dumped, unnest(extcondition) AS condition
  FROM pg_extension WHERE extname = 'claims_cell' ORDER BY 1;

\d+ claims_cell.*

\c contrib_regression
DROP DATABASE claims_cell_catalog;
