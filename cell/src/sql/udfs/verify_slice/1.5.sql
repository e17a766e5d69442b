-- verify(): one batch's comparison is verify_compare() over the text of
-- the store's listing (the SQL full joins over jsonb took half its time).
CREATE OR REPLACE FUNCTION @extschema@.verify_slice("table" regclass, repair boolean, resume_after bytea,
                                         deadline timestamptz,
                                         OUT missing bigint, OUT extra bigint, OUT drifted bigint,
                                         OUT repaired bigint, OUT skipped_recent bigint,
                                         OUT last_source_id bytea, OUT done boolean)
RETURNS record
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tab regclass := "table";
    cfg record;
    st record;
    keycol record;
    key_attnums smallint[];
    multi boolean;
    key_cols text;
    pk_expr text;
    a record;
    other record;
    attrs jsonb;
    enc text := pg_catalog.current_setting('server_encoding');
    cutoff timestamptz;
    sid_expr text;
    recent_expr text;
    cols text;
    entries_sql text;
    entry_arrays_sql text;
    e_sid text[];
    e_pk text[];
    e_bucket text[];
    e_value text[];
    e_subject_type text[];
    e_subject_id bigint[];
    e_source_type text[];
    e_col text[];
    lateral_vals text := '';
    rows_sql text;
    key_expr text;
    lo bytea := resume_after;
    hi bytea;
    lo_int bigint;
    nrows integer;
    maxsid bytea;
    recent_sids text[];
    stored text[];
    stored2 text[];
    pass integer;
    held_where text := '';
    moved text[] := '{}';
    cls record;
    fixes jsonb;
    fresh jsonb;
    fresh_n integer;
    fresh_max bytea;
    fresh_recent text[];
    chunk_limit integer;
    kept record;
    det regclass;
    det_sql text;
    det_held text[];
BEGIN
    missing := 0; extra := 0; drifted := 0; repaired := 0; skipped_recent := 0; done := false;
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'claims_cell.verify() must run in a READ COMMITTED transaction'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Each batch must compare the rows committed now with the claims at the store now.';
    END IF;
    SELECT c.server_name, c.cell_id INTO cfg FROM @extschema@.configuration c;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'claims_cell is not configured'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Call claims_cell.configure(server_name, cell_id) first.';
    END IF;
    st := @extschema@.verify_settings();
    chunk_limit := LEAST(1000, st.max_batch_size);

    SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
               'col', v.attname, 'bucket_type', c.bucket_type, 'subject_type', c.subject_type,
               'subject_col', s.attname, 'source_type', c.source_type,
               'integer_valued', (pg_catalog.string_to_array(pg_catalog.encode(t.tgargs, 'escape'), '\000'))[7] = 't')
               ORDER BY c.attnum)
      INTO attrs
      FROM @extschema@.claimed_attributes c
      JOIN pg_catalog.pg_attribute v ON v.attrelid = c.table_name AND v.attnum = c.attnum
      JOIN pg_catalog.pg_attribute s ON s.attrelid = c.table_name AND s.attnum = c.subject_attnum
      LEFT JOIN pg_catalog.pg_trigger t ON t.tgrelid = c.table_name AND t.tgname = c.trigger_name
     WHERE c.table_name = tab AND c.enabled;
    IF attrs IS NULL THEN
        IF EXISTS (SELECT 1 FROM @extschema@.claimed_attributes c WHERE c.table_name = tab) THEN
            RAISE NOTICE 'claiming of every claimed column of table % is paused; nothing to verify', tab;
            done := true;
            RETURN;
        END IF;
        RAISE EXCEPTION 'table % has no claimed columns', tab
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Claim a column with claims_cell.claim_column first.';
    END IF;
    -- the store lists records by source type and bucket type: another
    -- table's claims of the same pair, or a paused column's of this table,
    -- would look like extra claims here
    SELECT c.table_name, v.attname, c.source_type, c.bucket_type INTO other
      FROM @extschema@.claimed_attributes c
      JOIN pg_catalog.pg_attribute v ON v.attrelid = c.table_name AND v.attnum = c.attnum
     WHERE (c.table_name <> tab OR NOT c.enabled)
       AND (c.source_type, c.bucket_type) IN
           (SELECT e->>'source_type', e->>'bucket_type' FROM pg_catalog.jsonb_array_elements(attrs) e)
     ORDER BY c.table_name = tab
     LIMIT 1;
    IF FOUND AND other.table_name <> tab THEN
        RAISE EXCEPTION 'cannot verify table %: table % claims the same bucket type % with source type %',
                tab, other.table_name, other.bucket_type, other.source_type
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'The claims store lists a cell''s records by source type; the two tables'' claims cannot be told apart.';
    ELSIF FOUND THEN
        RAISE EXCEPTION 'cannot verify table %: its paused column % claims the same bucket type % with source type % as a claimed column',
                tab, other.attname, other.bucket_type, other.source_type
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'The claims store lists a cell''s records by source type; the paused column''s claims cannot be told apart.',
                  HINT = 'Resume the column with claims_cell.set_claiming, or unclaim it.';
    END IF;

    -- the source key: the primary key's columns, in key order; the source
    -- id's bytes sort as ROW(key_cols) does (sourcekey.c)
    SELECT COALESCE(c.source_attnums, ARRAY[c.source_attnum]) INTO key_attnums
      FROM @extschema@.claimed_attributes c WHERE c.table_name = tab AND c.enabled LIMIT 1;
    multi := pg_catalog.cardinality(key_attnums) > 1;
    SELECT a2.attname, a2.atttypid, pg_catalog.format_type(a2.atttypid, NULL) AS typname
      INTO keycol FROM pg_catalog.pg_attribute a2
     WHERE a2.attrelid = tab AND a2.attnum = key_attnums[1];
    SELECT pg_catalog.string_agg(CASE WHEN a2.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype, 'uuid'::regtype)
                                      THEN pg_catalog.format('t.%I', a2.attname)
                                      ELSE pg_catalog.format('(t.%I::pg_catalog.text COLLATE "C")', a2.attname) END,
                                 ', ' ORDER BY u.i),
           pg_catalog.format('ROW(%s)::pg_catalog.text',
                             pg_catalog.string_agg(pg_catalog.format('t.%I', a2.attname), ', ' ORDER BY u.i))
      INTO key_cols, pk_expr
      FROM pg_catalog.unnest(key_attnums) WITH ORDINALITY AS u(attnum, i)
      JOIN pg_catalog.pg_attribute a2 ON a2.attrelid = tab AND a2.attnum = u.attnum;
    key_expr := key_cols;
    IF NOT multi THEN
        pk_expr := pg_catalog.format('t.%I::pg_catalog.text', keycol.attname);
    END IF;
    sid_expr := @extschema@.source_id_sql(tab, key_attnums, 't');

    -- recency: the table's updated_at, else commit timestamps, else none
    cutoff := pg_catalog.now() - st.verify_recent;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_attribute u
                WHERE u.attrelid = tab AND u.attname = 'updated_at' AND NOT u.attisdropped
                  AND u.atttypid IN ('timestamptz'::regtype, 'timestamp'::regtype)) THEN
        recent_expr := pg_catalog.format('COALESCE(t.updated_at::pg_catalog.timestamptz > %L::pg_catalog.timestamptz, false)', cutoff);
    ELSIF pg_catalog.current_setting('track_commit_timestamp') = 'on' THEN
        recent_expr := pg_catalog.format('COALESCE(pg_catalog.pg_xact_commit_timestamp(t.xmin) > %L::pg_catalog.timestamptz, false)', cutoff);
    ELSE
        recent_expr := 'false';
    END IF;

    cols := pg_catalog.format('%s AS sid, %s AS pk, %s AS recent', sid_expr, pk_expr, recent_expr);
    nrows := 0;
    FOR a IN SELECT * FROM pg_catalog.jsonb_to_recordset(attrs)
                 AS x(col name, bucket_type text, subject_type text, subject_col name,
                      source_type text, integer_valued boolean)
    LOOP
        nrows := nrows + 1;
        cols := cols || pg_catalog.format(', t.%I::pg_catalog.text AS v%s, t.%I::pg_catalog.int8 AS s%s',
                                          a.col, nrows, a.subject_col, nrows);
        held_where := held_where || CASE WHEN nrows > 1 THEN ' OR ' ELSE '' END ||
            pg_catalog.format('t.%I::pg_catalog.text = ANY ($1)', a.col);
        lateral_vals := lateral_vals || CASE WHEN nrows > 1 THEN ', ' ELSE '' END ||
            pg_catalog.format('(b.v%s, b.s%s, %L, %L, %L, %L, %L::boolean)', nrows, nrows,
                              a.bucket_type, a.subject_type, a.source_type, a.col, a.integer_valued);
    END LOOP;
    -- one entry per claimable value of the rows b, as the row trigger
    -- claims it; the rows' query goes before it: 'WITH b AS (rows) ' || entries_sql
    entries_sql := 'SELECT (SELECT pg_catalog.count(*) FROM b)::integer, (SELECT b.sid FROM b ORDER BY b.sid DESC LIMIT 1),'
        ' (SELECT pg_catalog.array_agg(pg_catalog.encode(b.sid, ''hex'')) FROM b WHERE b.recent),'
        ' (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(''sid'', pg_catalog.encode(b.sid, ''hex''),'
        '   ''pk'', b.pk, ''bucket_type'', x.bt, ''value'', x.v, ''subject_type'', x.st, ''subject_id'', x.sj,'
        '   ''source_type'', x.srt, ''col'', x.col)), ''[]'')'
        '    FROM b CROSS JOIN LATERAL (VALUES ' || lateral_vals || ') AS x(v, sj, bt, st, srt, col, iv)'
        '   WHERE x.v IS NOT NULL AND pg_catalog.btrim(x.v, E'' \t\n\r\f\v'') <> '''''
        '     AND pg_catalog.char_length(x.v) <= 1024 AND pg_catalog.octet_length(b.sid) <= 128'
        '     AND (NOT x.iv OR CASE WHEN x.v ~ ''^(0|-?[1-9][0-9]{0,18})$'''
        '                           THEN x.v::pg_catalog.numeric BETWEEN -9223372036854775808 AND 9223372036854775807'
        '                           ELSE false END)'
        '     AND x.sj IS NOT NULL AND x.sj <> 0)';
    -- the same entries as parallel arrays, for verify_compare()
    entry_arrays_sql := 'SELECT (SELECT pg_catalog.count(*) FROM b)::integer, (SELECT b.sid FROM b ORDER BY b.sid DESC LIMIT 1),'
        ' (SELECT pg_catalog.array_agg(pg_catalog.encode(b.sid, ''hex'')) FROM b WHERE b.recent), e.*'
        '  FROM (SELECT pg_catalog.array_agg(pg_catalog.encode(b.sid, ''hex'')), pg_catalog.array_agg(b.pk),'
        '               pg_catalog.array_agg(x.bt), pg_catalog.array_agg(x.v), pg_catalog.array_agg(x.st),'
        '               pg_catalog.array_agg(x.sj), pg_catalog.array_agg(x.srt), pg_catalog.array_agg(x.col::pg_catalog.text)'
        '    FROM b CROSS JOIN LATERAL (VALUES ' || lateral_vals || ') AS x(v, sj, bt, st, srt, col, iv)'
        '   WHERE x.v IS NOT NULL AND pg_catalog.btrim(x.v, E'' \t\n\r\f\v'') <> '''''
        '     AND pg_catalog.char_length(x.v) <= 1024 AND pg_catalog.octet_length(b.sid) <= 128'
        '     AND (NOT x.iv OR CASE WHEN x.v ~ ''^(0|-?[1-9][0-9]{0,18})$'''
        '                           THEN x.v::pg_catalog.numeric BETWEEN -9223372036854775808 AND 9223372036854775807'
        '                           ELSE false END)'
        '     AND x.sj IS NOT NULL AND x.sj <> 0) e';

    LOOP
        -- the next 1000 source ids after lo, in the store's order: hi, the
        -- end of this batch's range (NULL for the last batch: open above)
        IF multi THEN
            rows_sql := pg_catalog.format('SELECT %1$s AS sid FROM %2$s t WHERE %4$s AND pg_catalog.octet_length(%1$s) <= 128 ORDER BY %3$s LIMIT 1000',
                sid_expr, tab, key_cols, @extschema@.verify_row_range(tab, key_attnums, key_cols, lo, NULL));
        ELSIF keycol.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype) THEN
            -- big-endian two's complement: the non-negative keys, then the negative ones
            lo_int := CASE WHEN lo IS NULL THEN NULL
                           ELSE ('x' || pg_catalog.encode(lo, 'hex'))::bit(64)::bigint END;
            IF lo_int IS NULL OR lo_int >= 0 THEN
                rows_sql := pg_catalog.format(
                    '(SELECT %1$s AS sid FROM %2$s t WHERE t.%3$I >= 0 %4$s ORDER BY t.%3$I LIMIT 1000)'
                    ' UNION ALL (SELECT %1$s FROM %2$s t WHERE t.%3$I < 0 ORDER BY t.%3$I LIMIT 1000)'
                    ' ORDER BY 1 LIMIT 1000',
                    sid_expr, tab, keycol.attname,
                    CASE WHEN lo_int IS NULL THEN '' ELSE pg_catalog.format('AND t.%I > %s', keycol.attname, lo_int) END);
            ELSE
                rows_sql := pg_catalog.format(
                    'SELECT %1$s AS sid FROM %2$s t WHERE t.%3$I < 0 AND t.%3$I > %4$s ORDER BY t.%3$I LIMIT 1000',
                    sid_expr, tab, keycol.attname, lo_int);
            END IF;
        ELSE
            -- a key longer than the store's 128 bytes is never claimed (the
            -- trigger refuses it) and cannot bound a listing: skipped
            rows_sql := pg_catalog.format('SELECT %1$s AS sid FROM %2$s t WHERE %4$s AND pg_catalog.octet_length(%1$s) <= 128 ORDER BY %3$s LIMIT 1000',
                sid_expr, tab, key_expr, @extschema@.verify_range(key_expr, keycol.atttypid, enc, lo, NULL));
        END IF;
        EXECUTE 'SELECT pg_catalog.count(*)::integer, (pg_catalog.array_agg(b.sid ORDER BY b.sid DESC))[1]'
                ' FROM (' || rows_sql || ') b'
           INTO nrows, maxsid;
        hi := CASE WHEN nrows >= 1000 THEN maxsid END;

        -- the store's records of the same source id range
        stored := @extschema@.verify_list_store_pages(cfg.server_name, cfg.cell_id, attrs, lo, hi);

        -- the rows of the range, read after the store's records
        EXECUTE 'WITH b AS (' ||
                    pg_catalog.format('SELECT %s FROM %s t WHERE %s', cols, tab,
                                      CASE WHEN multi THEN @extschema@.verify_row_range(tab, key_attnums, key_cols, lo, hi)
                                           ELSE @extschema@.verify_range(key_expr, keycol.atttypid, enc, lo, hi) END)
                    || ') ' || entry_arrays_sql
           INTO fresh_n, fresh_max, recent_sids, e_sid, e_pk, e_bucket, e_value, e_subject_type,
                e_subject_id, e_source_type, e_col;

        -- compare: one row per value on either side. A difference stands
        -- only if a second listing, taken after the rows were read, shows
        -- the store's record unchanged: a change that committed here before
        -- the read had its lease at the store before it, so it shows in
        -- one of the two listings as leased or as a changed record
        stored2 := stored;
        FOR pass IN 1 .. 2 LOOP
            cls := @extschema@.verify_compare(e_sid, e_pk, e_bucket, e_value, e_subject_type, e_subject_id,
                                              e_source_type, e_col, stored, stored2, recent_sids, moved, cutoff);
            EXIT WHEN pass = 2 OR cls.n_fixes + cls.n_duplicate = 0;
            stored2 := @extschema@.verify_list_store_pages(cfg.server_name, cfg.cell_id, attrs, lo, hi);
            -- the same listing again: the second comparison would repeat the first
            EXIT WHEN stored2 = stored;
        END LOOP;
        skipped_recent := skipped_recent + cls.n_recent;
        IF cls.duplicates IS NOT NULL THEN
            RAISE WARNING 'claims_cell: table % holds the same claimed value in more than one row: %',
                tab, cls.duplicates
                USING DETAIL = 'Rows written without the claims_cell triggers; such values are not repaired.';
        END IF;

        -- an extra value that a row of another batch holds was moved there
        -- with the triggers off: drifted, replaced, never destroyed (its
        -- row's batch then skips it as moved)
        fixes := cls.fixes;
        IF fixes @? '$[*] ? (@.kind == "extra")' THEN
            EXECUTE 'WITH b AS (' || pg_catalog.format('SELECT %s FROM %s t WHERE %s', cols, tab, held_where)
                    || ') ' || entries_sql
               INTO fresh_n, fresh_max, fresh_recent, fresh
              USING (SELECT pg_catalog.array_agg(f->>'value') FROM pg_catalog.jsonb_array_elements(fixes) f
                      WHERE f->>'kind' = 'extra');
            WITH h AS (
                SELECT x->>'bucket_type' AS bucket_type, x->>'value' AS value,
                       (pg_catalog.array_agg(x))[1] || '{"kind": "drifted"}' AS fix,
                       pg_catalog.count(*) AS n,
                       pg_catalog.bool_or(x->>'sid' = ANY (COALESCE(fresh_recent, '{}'))) AS recent
                  FROM pg_catalog.jsonb_array_elements(fresh) x GROUP BY 1, 2)
            SELECT COALESCE(pg_catalog.jsonb_agg(COALESCE(h.fix, f.x) ORDER BY f.i)
                                FILTER (WHERE h.n IS NULL OR (h.n = 1 AND NOT h.recent)), '[]'),
                   pg_catalog.count(*) FILTER (WHERE h.recent),
                   pg_catalog.count(*) FILTER (WHERE h.n > 1 AND NOT h.recent),
                   moved || COALESCE(pg_catalog.array_agg(h.bucket_type || ':' || h.value)
                                         FILTER (WHERE h.n IS NOT NULL), '{}')
              INTO fixes, nrows, fresh_n, moved
              FROM pg_catalog.jsonb_array_elements(fixes) WITH ORDINALITY AS f(x, i)
              LEFT JOIN h ON f.x->>'kind' = 'extra' AND h.bucket_type = f.x->>'bucket_type'
                         AND h.value = f.x->>'value';
            skipped_recent := skipped_recent + nrows;
            IF fresh_n > 0 THEN
                missing := missing + fresh_n;
                RAISE WARNING 'claims_cell: table % holds % claimed values in more than one row', tab, fresh_n
                    USING DETAIL = 'Rows written without the claims_cell triggers; such values are not repaired.';
            END IF;
        END IF;

        -- an extra value a row of a partition detached from this table
        -- holds stays claimed, as after unclaim_column
        IF fixes @? '$[*] ? (@.kind == "extra")' THEN
            FOR det IN SELECT d.table_name FROM @extschema@.detached_partitions d
                        WHERE d.partitioned_table = tab
            LOOP
                SELECT pg_catalog.string_agg(pg_catalog.format(
                           'SELECT %L || '':'' || t.%I::pg_catalog.text FROM %s t WHERE t.%I::pg_catalog.text = ANY ($1)',
                           x.bucket_type, x.col, det, x.col), ' UNION ')
                  INTO det_sql
                  FROM pg_catalog.jsonb_to_recordset(attrs) AS x(col name, bucket_type text)
                 WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_attribute v
                                WHERE v.attrelid = det AND v.attname = x.col AND NOT v.attisdropped);
                CONTINUE WHEN det_sql IS NULL;
                EXECUTE 'SELECT pg_catalog.array_agg(h) FROM (' || det_sql || ') s(h)' INTO det_held
                  USING (SELECT pg_catalog.array_agg(f->>'value') FROM pg_catalog.jsonb_array_elements(fixes) f
                          WHERE f->>'kind' = 'extra');
                CONTINUE WHEN det_held IS NULL;
                SELECT COALESCE(pg_catalog.jsonb_agg(f ORDER BY i), '[]') INTO fixes
                  FROM pg_catalog.jsonb_array_elements(fixes) WITH ORDINALITY AS e(f, i)
                 WHERE NOT (f->>'kind' = 'extra' AND (f->>'bucket_type') || ':' || (f->>'value') = ANY (det_held));
            END LOOP;
        END IF;

        -- re-read the rows of the differences, after the second listing
        -- (with repair locked until this transaction ends): a row changed
        -- since the batch was read is left for the next run, and so is a
        -- row a writer holds (SKIP LOCKED: a session idle in transaction
        -- never stops a verification, nor the worker running it)
        IF fixes @? '$[*] ? (@.kind != "extra")' THEN
            EXECUTE 'WITH b AS (' ||
                pg_catalog.format('SELECT %s FROM %s t WHERE %s%s',
                                  cols, tab,
                                  CASE WHEN multi
                                       THEN pg_catalog.format('%s = ANY ($1::pg_catalog.text[]) AND %s', pk_expr,
                                                              @extschema@.verify_row_range(tab, key_attnums, key_cols, lo, hi))
                                       ELSE pg_catalog.format('t.%I = ANY ($1::%s[])', keycol.attname, keycol.typname) END,
                                  CASE WHEN repair THEN ' FOR SHARE OF t SKIP LOCKED' ELSE '' END) || ') ' || entry_arrays_sql
               INTO fresh_n, fresh_max, fresh_recent, e_sid, e_pk, e_bucket, e_value, e_subject_type,
                    e_subject_id, e_source_type, e_col
              USING (SELECT pg_catalog.array_agg(f->>'pk') FROM pg_catalog.jsonb_array_elements(fixes) f
                      WHERE f->>'kind' <> 'extra');
            kept := @extschema@.verify_keep_fixes(fixes, e_sid, e_bucket, e_value, e_subject_id, fresh_recent);
            fixes := kept.fixes;
            skipped_recent := skipped_recent + kept.skipped;
        END IF;
        SELECT missing + cls.n_duplicate + pg_catalog.count(*) FILTER (WHERE f->>'kind' = 'missing'),
               extra + pg_catalog.count(*) FILTER (WHERE f->>'kind' = 'extra'),
               drifted + pg_catalog.count(*) FILTER (WHERE f->>'kind' = 'drifted')
          INTO missing, extra, drifted
          FROM pg_catalog.jsonb_array_elements(fixes) f;
        IF repair AND pg_catalog.jsonb_array_length(fixes) > 0 THEN
            repaired := repaired + @extschema@.verify_repair(cfg.server_name, cfg.cell_id, tab, fixes, chunk_limit);
        END IF;

        last_source_id := COALESCE(hi, maxsid, lo);
        IF hi IS NULL THEN
            done := true;
            RETURN;
        END IF;
        lo := hi;
        EXIT WHEN deadline IS NOT NULL AND pg_catalog.clock_timestamp() >= deadline;
    END LOOP;
END
$$;
