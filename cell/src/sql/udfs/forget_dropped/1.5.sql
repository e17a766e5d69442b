-- DROP COLUMN of the last claimed column drops the statement trigger too.
CREATE OR REPLACE FUNCTION @extschema@.forget_dropped()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    gone record;
BEGIN
    -- DROP EXTENSION drops the table itself
    IF pg_catalog.to_regclass('@extschema@.claimed_attributes') IS NULL
       OR pg_catalog.to_regclass('@extschema@.verify_progress') IS NULL THEN
        RETURN;
    END IF;
    -- a dropped table's verification progress goes with it
    DELETE FROM @extschema@.verify_progress p
     USING pg_catalog.pg_event_trigger_dropped_objects() d
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
       AND d.objid OPERATOR(pg_catalog.=) p.table_name AND d.objsubid OPERATOR(pg_catalog.=) 0;
    -- a dropped table is no detached partition any more
    IF pg_catalog.to_regclass('@extschema@.detached_partitions') IS NOT NULL THEN
        DELETE FROM @extschema@.detached_partitions p
         USING pg_catalog.pg_event_trigger_dropped_objects() d
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.objsubid OPERATOR(pg_catalog.=) 0
           AND d.objid OPERATOR(pg_catalog.=) ANY (ARRAY[p.table_name, p.partitioned_table]::pg_catalog.oid[]);
    END IF;
    FOR gone IN
        DELETE FROM @extschema@.claimed_attributes c
         USING pg_catalog.pg_event_trigger_dropped_objects() d
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.objid OPERATOR(pg_catalog.=) c.table_name
           AND (d.objsubid IN (0, c.attnum, c.subject_attnum, c.source_attnum)
                OR d.objsubid OPERATOR(pg_catalog.=) ANY (c.source_attnums))
        RETURNING c.table_name, c.attnum, c.trigger_name, d.objsubid, d.object_identity
    LOOP
        IF gone.objsubid OPERATOR(pg_catalog.<>) 0 THEN
            -- a column of a table that stays: its trigger would fail
            EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS %I ON %s',
                                      gone.trigger_name, gone.table_name);
            IF NOT EXISTS (SELECT 1 FROM @extschema@.claimed_attributes c
                            WHERE c.table_name OPERATOR(pg_catalog.=) gone.table_name) THEN
                EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS claims_cell_truncate ON %s',
                                          gone.table_name);
                IF EXISTS (SELECT 1 FROM pg_catalog.pg_trigger g
                            WHERE g.tgrelid OPERATOR(pg_catalog.=) gone.table_name
                              AND g.tgname OPERATOR(pg_catalog.=) 'claims_cell_statement') THEN
                    EXECUTE pg_catalog.format('DROP TRIGGER claims_cell_statement ON %s',
                                              gone.table_name);
                END IF;
            END IF;
            RAISE NOTICE 'a column of table % is no longer claimed: column % was dropped',
                gone.table_name, gone.object_identity;
        END IF;
    END LOOP;
END
$$;
