#!/usr/bin/env bash
# bench/run.sh: throughput and latency of the claims extension (`make bench`).
#
# Starts a throwaway PostgreSQL 15 server (data and socket under a fresh
# /tmp/claims-bench.XXXXXX, owned by the unprivileged OS user "claims", which
# is created when missing and the script runs as root), with the extension
# preloaded and durable settings (fsync on, synchronous_commit on). Loads
# two databases:
#   bench        the "empty" store: a small lookup set, one cell with
#                verification data, one cell with many outstanding leases;
#   bench_scale  the same plus BENCH_SCALE_CLAIMS claims loaded in bulk;
#   bench_cell   (section cell) a cell: claims_cell configured as cell 902
#                of bench, and the same lease protocol by hand over dblink
#                (cell_setup.sql), for the claimed signup's comparison.
# Then runs every scenario with pgbench -M prepared and prints one table:
# scenario, clients, transactions/s, claims/s, latency p50/p99 (from the
# per-transaction logs), WAL bytes per transaction (full-page images in
# parentheses), server CPU ms per transaction, and the ratio to the
# scenario's floor (a plain SQL script doing the same writes or read without
# validation) or, for the scale runs, to the same scenario on the empty
# store. The signup also runs against signup_plpgsql.sql, the same protocol
# as plain PL/pgSQL functions (setup.sql). A scenario and its references run
# alternately (A B B A ..., A B C C B A ...) and the ratio is of the means.
# Prints the contention outcomes by SQLSTATE and the targets met or missed.
# The latest full run is kept in bench/RESULTS.md.
#
# Environment (defaults in brackets, quick-mode defaults after the bar):
#   BENCH_QUICK=1            small everything, well under 3 minutes
#   BENCH_SECONDS            seconds per pgbench run [10 | 3]
#   BENCH_ROUNDS             alternations per comparison [3 | 1]
#   BENCH_SINGLE_ROUNDS      runs of a scenario without reference [1]
#   BENCH_CLIENTS            client counts [1 8 16 | 1 8]
#   BENCH_SCALE_CLIENTS      client counts of the scale comparison [1 8 | 8]
#   BENCH_SCALE_FLOORS=0     skip the floors' own scale comparison [1]
#   BENCH_SCALE_CLAIMS       claims in bench_scale [5000000 | 200000]
#   BENCH_LOOKUP_CLAIMS      lookup set of the empty store [10000]
#   BENCH_SCAN_USERS         users (3 claims each) of the scanned cell [10000 | 2000]
#   BENCH_LEASES             outstanding leases of the reconciled cell [10000 | 2000]
#   BENCH_LEASE_PAGE         claims_list_leases page size [1000]
#   BENCH_BATCH              backfill batch size [1000]
#   BENCH_CONTENTION_CLIENTS [16]; BENCH_CONTENTION_SECONDS [2 x BENCH_SECONDS]
#   BENCH_HOT_VALUES         hot values of the contention run [100]
#   BENCH_CELL_CLIENTS       client counts of the cell section [1 8]
#   BENCH_VERIFY_ROWS        rows of the verify section's table [100000 | 20000]
#   BENCH_VERIFY_BASELINE    extension scripts (oldest first, such as an older
#                            commit's claims_cell--1.2--1.3.sql and --1.3--1.4.sql)
#                            whose verify_slice and verify_repair the verify
#                            section also times, on the same data, alternating
#                            with the installed ones (A B B A) [none]
#   BENCH_ONLY               sections to run, of: scale signup lookup backfill
#                            rename list_records list_leases contention cell
#                            verify grpc [all]; grpc (claims-grpc against the
#                            same pairs in SQL) is bench/grpc.sh, on its own
#                            server, its table printed after the others
#   BENCH_SHARED_BUFFERS     [a quarter of RAM, at least 1GB, at most 8GB]
#   BENCH_PGSS=1             preload pg_stat_statements (track = all) and keep
#                            its top statements in the work directory
#   BENCH_KEEP=1             keep the work directory (logs, server log)
#   BENCH_RESULTS            file for the results [bench/RESULTS.md; none in
#                            quick mode or with BENCH_ONLY, so that a partial
#                            run never replaces the full table]
#   BENCH_CODE               what code is measured, for the table's header [the
#                            last commits that changed the store's and the
#                            cell's code; `bench/run.sh --code` prints it]
#   BENCH_PORT, PG_CONFIG, CLAIMS_OS_USER
set -u -o pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# code_of PATH...: the last commit that changed PATH... (and whether the tree
# changes them now), or "unknown" outside a git checkout.
code_of() {
    local c
    c="$(cd "$BENCH_DIR/.." && git log -1 --format='%h (%cd)' --date=format:'%Y-%m-%d %H:%M' -- "$@" 2>/dev/null)" &&
        [ -n "$c" ] || { echo unknown; return; }
    (cd "$BENCH_DIR/.." && [ -n "$(git status --porcelain -- "$@" 2>/dev/null)" ]) && c="$c plus uncommitted changes"
    echo "$c"
}
BENCH_CODE="${BENCH_CODE:-store code of commit $(code_of src common claims.control), cell code of commit $(code_of cell/src cell/claims_cell.control common)}"
if [ "${1:-}" = --code ]; then
    echo "$BENCH_CODE"
    exit 0
fi
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
# This tree is what is measured: as root, install what the benchmark needs
# (scripts/deps.sh), build and install both extensions; claims-grpc is
# built in any case (scripts/build.sh).
if [ "$(id -u)" -eq 0 ]; then
    PG_CONFIG="$PG_CONFIG" "$BENCH_DIR/../scripts/deps.sh" >/dev/null || { echo "run.sh: dependencies are missing" >&2; exit 1; }
fi
PG_CONFIG="$PG_CONFIG" "$BENCH_DIR/../scripts/build.sh" || { echo "run.sh: the build failed" >&2; exit 1; }
BINDIR="$("$PG_CONFIG" --bindir)" || { echo "run.sh: cannot run $PG_CONFIG" >&2; exit 1; }
RUN_USER="${CLAIMS_OS_USER:-claims}"
NPROC="$(nproc)"

QUICK="${BENCH_QUICK:-0}"
if [ "$QUICK" = 1 ]; then
    D_SECONDS=3 D_ROUNDS=1 D_CLIENTS="1 8" D_SCALE_CLIENTS="8" D_SCALE=200000
    D_SCAN_USERS=2000 D_LEASES=2000 D_RESULTS="" D_VERIFY_ROWS=20000
else
    D_SECONDS=10 D_ROUNDS=3 D_CLIENTS="1 8 16" D_SCALE_CLIENTS="1 8" D_SCALE=5000000
    D_SCAN_USERS=10000 D_LEASES=10000 D_RESULTS="$BENCH_DIR/RESULTS.md" D_VERIFY_ROWS=100000
fi
SECS="${BENCH_SECONDS:-$D_SECONDS}"
ROUNDS="${BENCH_ROUNDS:-$D_ROUNDS}"
SINGLE_ROUNDS="${BENCH_SINGLE_ROUNDS:-1}"
SCALE_FLOORS="${BENCH_SCALE_FLOORS:-1}"
CLIENTS="${BENCH_CLIENTS:-$D_CLIENTS}"
SCALE_CLIENTS="${BENCH_SCALE_CLIENTS:-$D_SCALE_CLIENTS}"
SCALE="${BENCH_SCALE_CLAIMS:-$D_SCALE}"
LOOKUP="${BENCH_LOOKUP_CLAIMS:-10000}"
SCAN_USERS="${BENCH_SCAN_USERS:-$D_SCAN_USERS}"
LEASES="${BENCH_LEASES:-$D_LEASES}"
LEASE_PAGE="${BENCH_LEASE_PAGE:-1000}"
RECORD_PAGE=1000
BATCH="${BENCH_BATCH:-1000}"
CONT_CLIENTS="${BENCH_CONTENTION_CLIENTS:-16}"
CONT_SECS="${BENCH_CONTENTION_SECONDS:-$((2 * SECS))}"
NHOT="${BENCH_HOT_VALUES:-100}"
RENAME_POOL=1000
CELL_CLIENTS="${BENCH_CELL_CLIENTS:-1 8}"
VERIFY_ROWS="${BENCH_VERIFY_ROWS:-$D_VERIFY_ROWS}"
VERIFY_BASELINE="${BENCH_VERIFY_BASELINE:-}"
ONLY="${BENCH_ONLY:-scale signup lookup backfill rename list_records list_leases contention cell verify grpc}"
# Only the grpc section: bench/grpc.sh needs nothing of this script's server.
if [ "$(echo $ONLY)" = grpc ]; then
    exec "$BENCH_DIR/grpc.sh"
fi
# A quarter of RAM (1GB to 8GB): the stores must stay in shared_buffers,
# because machines like the one in RESULTS.md give no lasting OS page cache.
D_SHARED_MB=$(awk '/MemTotal/ { m = int($2 / 1024 / 4); if (m < 1024) m = 1024; if (m > 8192) m = 8192; print m }' /proc/meminfo)
SHARED_BUFFERS="${BENCH_SHARED_BUFFERS:-${D_SHARED_MB}MB}"
PGSS="${BENCH_PGSS:-0}"
KEEP="${BENCH_KEEP:-0}"
[ -n "${BENCH_ONLY:-}" ] && D_RESULTS=""
RESULTS_FILE="${BENCH_RESULTS-$D_RESULTS}"
PORT="${BENCH_PORT:-$((40000 + $$ % 10000))}"

SCAN_CELL=900
LEASE_CELL=901
CELL_CELL=902
DB=bench
DB_SCALE=bench_scale
DB_CELL=bench_cell

WORK=""
SOCK=""
STARTED=$(date +%s)
FAILURES=0
PGB_SEQ=0
# Run ids make every generated value unique on this server (and, with the
# clock in them, across servers started a while apart).
RUN_BASE=$((($(date +%s) % 100000) * 100))

# A progress line on stderr: elapsed time and what is going on.
progress() {
    local t=$(($(date +%s) - STARTED))
    printf '[%02d:%02d] %s\n' $((t / 60)) $((t % 60)) "$*" >&2
}

die() {
    echo "run.sh: $*" >&2
    exit 1
}

wants() {
    case " $ONLY " in *" $1 "*) return 0 ;; esac
    return 1
}

# Run a command as the server's OS user.
as_server() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u "$RUN_USER" -- "$@"
    else
        "$@"
    fi
}

psql_db() {
    local db="$1"
    shift
    "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -U bench -d "$db" "$@"
}

# One value from a query.
psql_val() {
    local db="$1"
    shift
    "$BINDIR/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -U bench -d "$db" -c "$*"
}

cleanup() {
    if [ -n "$WORK" ] && [ -f "$WORK/data/postmaster.pid" ]; then
        as_server "$BINDIR/pg_ctl" -D "$WORK/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
            as_server "$BINDIR/pg_ctl" -D "$WORK/data" -m immediate -w stop >/dev/null 2>&1
    fi
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        if [ "$KEEP" = 1 ]; then
            echo "run.sh: kept $WORK" >&2
        else
            rm -rf "$WORK"
        fi
    fi
}

# Modification time of the installed claims.so.
so_mtime() {
    stat -c %y "$("$PG_CONFIG" --pkglibdir)/claims.so" 2>/dev/null | cut -d. -f1
}

start_server() {
    # What is measured: BENCH_CODE (the store's and the cell's code), and
    # the library the server loads (shared_preload_libraries) now.
    SO_AT_START="$(so_mtime)"
    EXT_INFO="$BENCH_CODE, claims.so installed $SO_AT_START"
    if [ "$(id -u)" -eq 0 ] && ! id -u "$RUN_USER" >/dev/null 2>&1; then
        progress "creating OS user $RUN_USER"
        useradd --system --create-home --shell /bin/bash "$RUN_USER" || die "cannot create user $RUN_USER"
    fi
    WORK="$(mktemp -d /tmp/claims-bench.XXXXXX)" || die "mktemp failed"
    SOCK="$WORK/sock"
    mkdir -p "$WORK/sock" "$WORK/logs" "$WORK/out" "$WORK/wal"
    [ "$(id -u)" -eq 0 ] && chown -R "$RUN_USER:" "$WORK"
    trap cleanup EXIT
    trap 'exit 130' INT TERM

    progress "initdb in $WORK/data"
    as_server "$BINDIR/initdb" -D "$WORK/data" -U bench -A trust -E UTF8 --locale=C \
        >"$WORK/initdb.log" 2>&1 || { cat "$WORK/initdb.log"; die "initdb failed"; }
    local preload="claims"
    # The cell section's cell database loads claims_cell (its circuit
    # breaker lives in shared memory).
    { wants cell || wants verify; } && preload="$preload,claims_cell"
    [ "$PGSS" = 1 ] && preload="$preload,pg_stat_statements"
    cat >>"$WORK/data/postgresql.conf" <<EOF

# claims benchmark
shared_preload_libraries = '$preload'
listen_addresses = ''
unix_socket_directories = '$SOCK'
port = $PORT
max_connections = 50
shared_buffers = $SHARED_BUFFERS
fsync = on
synchronous_commit = on
full_page_writes = on
max_wal_size = 16GB
min_wal_size = 1GB
checkpoint_timeout = 30min
checkpoint_completion_target = 0.9
maintenance_work_mem = 512MB
effective_cache_size = 8GB
log_lock_waits = on
EOF
    if wants cell || wants verify; then
        # A throughput run: a store call held up by a stalled fsync on a
        # noisy machine should wait, not fail the client with 08006.
        echo "claims_cell.call_timeout = 5s" >>"$WORK/data/postgresql.conf"
        # The background worker deletes committed leases' rows and, for
        # cell_signup_worker.sql, finishes the leases.
        echo "claims_cell.database = '$DB_CELL'" >>"$WORK/data/postgresql.conf"
    fi
    if [ "$PGSS" = 1 ]; then
        echo "pg_stat_statements.track = all" >>"$WORK/data/postgresql.conf"
    fi
    as_server "$BINDIR/pg_ctl" -D "$WORK/data" -l "$WORK/server.log" -w -t 120 start \
        >"$WORK/pg_ctl.log" 2>&1 || { tail -n 40 "$WORK/server.log"; die "the server did not start"; }
    # Login roles of the clients (see setup.sql): cells and the router.
    psql_db postgres -c "CREATE ROLE bench_cell LOGIN" -c "CREATE ROLE bench_router LOGIN" \
        >/dev/null || die "cannot create the client roles"
}

# The cells to register: one per client, the owners of the bulk-loaded
# claims (100..149), the scanned and the reconciled cell, and the four
# contention cells.
bench_cells() {
    local c max=1
    for c in $CLIENTS $SCALE_CLIENTS; do
        [ "$c" -gt "$max" ] && max="$c"
    done
    echo "ARRAY[$(seq -s, 1 "$max"),$(seq -s, 100 149),$SCAN_CELL,$LEASE_CELL,$CELL_CELL,1001,1002,1003,1004]::bigint[]"
}

# The role a script's clients connect as: floors write the tables as the
# superuser, lookups come from the router, everything else from a cell.
script_user() {
    case "$1" in
        *_floor.sql | *_plpgsql.sql) echo bench ;;
        cell_*.sql) echo bench ;;
        lookup.sql) echo bench_router ;;
        *) echo bench_cell ;;
    esac
}

# Bulk-load claims 'lk_1'..'lk_<n>' into a database in steps of a million.
bulk_load() {
    local db="$1" n="$2" lo=1 hi step=1000000
    while [ "$lo" -le "$n" ]; do
        hi=$((lo + step - 1))
        [ "$hi" -gt "$n" ] && hi="$n"
        progress "load $db: bulk claims $lo..$hi of $n"
        psql_db "$db" -c "SELECT bench_bulk_claims($lo, $hi)" >/dev/null || die "bulk load failed"
        lo=$((hi + 1))
    done
}

# Create the databases and load them.
load_data() {
    local db dbs=("$DB")
    wants scale && dbs+=("$DB_SCALE")
    for db in "${dbs[@]}"; do
        progress "load $db: CREATE EXTENSION claims, helpers"
        psql_db postgres -c "CREATE DATABASE $db" || die "createdb failed"
        psql_db "$db" -c "CREATE EXTENSION claims" -c "GRANT claims_router TO bench_router" \
            -f "$BENCH_DIR/setup.sql" -c "SELECT bench_register_cells($(bench_cells))" >/dev/null ||
            die "setup of $db failed"
    done
    bulk_load "$DB" "$LOOKUP"
    if wants scale; then
        bulk_load "$DB_SCALE" "$SCALE"
    fi
    for db in "${dbs[@]}"; do
        progress "load $db: cell $SCAN_CELL with $((SCAN_USERS * 3)) claims through the API"
        psql_db "$db" -c "SET synchronous_commit = off" \
            -c "CALL bench_load_scan_cell($SCAN_CELL, $SCAN_USERS)" || die "scan cell load failed"
    done
    progress "load $DB: cell $LEASE_CELL with $LEASES outstanding leases through the API"
    psql_db "$DB" -c "SET synchronous_commit = off" \
        -c "CALL bench_load_leases($LEASE_CELL, $LEASES)" || die "lease load failed"
    for db in "${dbs[@]}"; do
        progress "load $db: VACUUM ANALYZE, pg_prewarm into shared_buffers"
        psql_db "$db" -c "VACUUM ANALYZE" -c "CREATE EXTENSION IF NOT EXISTS pg_prewarm" \
            -c "SELECT sum(pg_prewarm(c.oid)) FROM pg_class c
                WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'i')
                  AND c.relname LIKE 'claim%'" >/dev/null || die "vacuum or prewarm of $db failed"
    done
    { wants cell || wants verify; } && load_cell
    psql_db "$DB" -c "CHECKPOINT"
    DB_SIZES="$(psql_val postgres "SELECT string_agg(datname || ' ' || pg_size_pretty(pg_database_size(datname)), ', ' ORDER BY datname)
                                   FROM pg_database WHERE datname LIKE 'bench%'")"

    # One sweep of each scan: pages per sweep, items per page (claims/s),
    # and a check that paging visits everything.
    local sweep
    sweep="$(psql_val "$DB" "SELECT pages || ' ' || records FROM bench_sweep_records($SCAN_CELL, $RECORD_PAGE)")"
    read -r REC_PAGES REC_ITEMS <<<"$sweep"
    [ "$REC_ITEMS" = $((SCAN_USERS * 3)) ] || die "records sweep returned $REC_ITEMS of $((SCAN_USERS * 3))"
    if wants scale; then
        sweep="$(psql_val "$DB_SCALE" "SELECT pages || ' ' || records FROM bench_sweep_records($SCAN_CELL, $RECORD_PAGE)")"
        [ "$sweep" = "$REC_PAGES $REC_ITEMS" ] || die "records sweep on $DB_SCALE: $sweep"
    fi
    sweep="$(psql_val "$DB" "SELECT pages || ' ' || leases FROM bench_sweep_leases($LEASE_CELL, $LEASE_PAGE)")"
    read -r LEASE_PAGES LEASE_ITEMS <<<"$sweep"
    [ "$LEASE_ITEMS" = "$LEASES" ] || die "leases sweep returned $LEASE_ITEMS of $LEASES"
    progress "loaded: records sweep $REC_ITEMS in $REC_PAGES pages, leases sweep $LEASE_ITEMS in $LEASE_PAGES pages"
}

# The cell section's database: claims_cell configured as cell $CELL_CELL of
# the store $DB on this same server, and the by-hand protocol (cell_setup.sql).
load_cell() {
    progress "load $DB_CELL: claims_cell as cell $CELL_CELL of $DB, dblink, the users tables"
    psql_db postgres -c "CREATE DATABASE $DB_CELL" >/dev/null || die "createdb $DB_CELL failed"
    psql_db "$DB_CELL" -v sock="$SOCK" -v port="$PORT" -v store="$DB" -v cell="$CELL_CELL" \
        -f "$BENCH_DIR/cell_setup.sql" >/dev/null || die "setup of $DB_CELL failed"
}

# p50 and p99 latency in ms of the per-transaction logs of a tag
# (all rounds pooled).
percentiles() {
    local tag="$1"
    cat "$WORK/logs/$tag"_r*.* 2>/dev/null | awk '$3 ~ /^[0-9]+$/ { print $3 }' | sort -n |
        awk '{ v[NR] = $1 }
             END {
                 if (NR == 0) { print "- -"; exit }
                 i50 = int(NR * 0.50); if (i50 < NR * 0.50) i50++; if (i50 < 1) i50 = 1
                 i99 = int(NR * 0.99); if (i99 < NR * 0.99) i99++; if (i99 < 1) i99 = 1
                 printf "%.2f %.2f\n", v[i50] / 1000, v[i99] / 1000
             }'
}

# run_pgbench TAG ROUND DB SCRIPT CLIENTS SECONDS [pgbench args...]
# Sets TPS to the transactions/s, or "ERROR". PRE_HOOK, when set, is called
# with the run id, the clients and the database before the run.
run_pgbench() {
    local tag="$1" round="$2" db="$3" script="$4" clients="$5" secs="$6"
    shift 6
    local threads=$((clients < NPROC ? clients : NPROC))
    local run out tps
    PGB_SEQ=$((PGB_SEQ + 1))
    run=$((RUN_BASE + PGB_SEQ))
    out="$WORK/out/${tag}_r$round.out"
    TPS=ERROR
    if [ -n "${PRE_HOOK:-}" ]; then
        "$PRE_HOOK" "$run" "$clients" "$db" >/dev/null || return
    fi
    psql_db "$db" -c CHECKPOINT >/dev/null 2>&1
    # WAL written during the run (server-wide: the runs are alone on it).
    local lsn0 lsn1 ntx
    lsn0="$(psql_val "$db" "SELECT pg_current_wal_insert_lsn()")"
    local ticks0 ticks1
    ticks0="$(server_ticks)"
    # A floor is the best plain SQL: generic plans, as PostgreSQL would
    # otherwise re-plan its data-modifying CTEs on every execution. (The
    # extension's own statements get generic plans without being told.)
    local pgopts=""
    case "$script" in
        *_floor.sql | *_plpgsql.sql) pgopts="-c plan_cache_mode=force_generic_plan" ;;
        *_worker.sql) pgopts="-c claims_cell.finish_leases_in=worker" ;;
    esac
    PGOPTIONS="$pgopts" "$BINDIR/pgbench" -n -M prepared -h "$SOCK" -p "$PORT" -U "$(script_user "$script")" \
        -c "$clients" -j "$threads" -T "$secs" \
        -D run="$run" -D n=0 -D batch="$BATCH" -D pool="$RENAME_POOL" \
        -D scell="$SCAN_CELL" -D lcell="$LEASE_CELL" -D nhot="$NHOT" \
        -D last=AA== -D next=- \
        --log --log-prefix="$WORK/logs/${tag}_r$round" \
        -f "$BENCH_DIR/$script" "$@" "$db" >"$out" 2>&1
    local rc=$?
    # The machine's 1-minute load average as the run ends (others share it).
    cut -d' ' -f1 /proc/loadavg >>"$WORK/loadavg"
    lsn1="$(psql_val "$db" "SELECT pg_current_wal_insert_lsn()")"
    wait_backends_gone
    ticks1="$(server_ticks)"
    tps="$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$out")"
    ntx="$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")"
    if [ -n "$lsn0" ] && [ -n "$lsn1" ] && [ -n "$ntx" ]; then
        # Bytes, transactions, and of the bytes the full-page images (the
        # first change of each page after the CHECKPOINT above).
        echo "$(psql_val "$db" "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')") $ntx $(as_server "$BINDIR/pg_waldump" \
            -p "$WORK/data/pg_wal" -s "$lsn0" -e "$lsn1" --stats 2>/dev/null | awk '$1 == "Total" { print $5 }')" \
            >>"$WORK/wal/$tag"
        # Server CPU (all processes, ticks of 1/CLK_TCK s) and transactions.
        [ -n "$ticks0" ] && [ -n "$ticks1" ] && echo "$((ticks1 - ticks0)) $ntx" >>"$WORK/wal/$tag.cpu"
    fi
    if [ "$rc" -ne 0 ] || [ -z "$tps" ] || grep -q "aborted" "$out"; then
        echo "run.sh: pgbench $tag round $round failed (status $rc):" >&2
        grep -E "error|ERROR|abort" "$out" | head -n 5 >&2
        return
    fi
    TPS="$tps"
}

mean() {
    awk '{ for (i = 1; i <= NF; i++) if ($i == "ERROR") bad = 1; else { s += $i; n++ } }
         END { if (bad || n == 0) print "ERROR"; else printf "%.1f\n", s / n }' <<<"$*"
}

ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a == "ERROR" || b == "ERROR" || b == 0) print "-"; else printf "%.2f\n", a / b }'
}

# CPU ticks the server has used so far: the postmaster and its live
# children, and the children that exited (the postmaster's cutime/cstime).
server_ticks() {
    local pm
    pm="$(head -n 1 "$WORK/data/postmaster.pid" 2>/dev/null)" || return
    # (cat, not awk, opens the files: a process may exit meanwhile.)
    cat /proc/[0-9]*/stat 2>/dev/null | awk -v pm="$pm" '
        {
            pid = $1
            sub(/^.*\) /, "")      # fields from state on: state=$1, ppid=$2
            if (pid == pm) t += $12 + $13 + $14 + $15
            else if ($2 == pm) t += $12 + $13
        }
        END { print t + 0 }'
}

# Wait (up to 10 s) until the backends of a finished pgbench run are gone,
# so that their CPU time has reached the postmaster's children's total.
wait_backends_gone() {
    local i
    for ((i = 0; i < 100; i++)); do
        [ "$(psql_val postgres "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")" = 0 ] && return
        sleep 0.1
    done
}

# WAL bytes per pgbench transaction of a tag (all rounds pooled), with the
# part that full-page images took in parentheses, or "-".
wal_per_tx() {
    awk '{ b += $1; n += $2; f += $3 }
         END { if (n > 0) printf "%.0f (%.0f)\n", b / n, f / n; else print "-" }' \
        "$WORK/wal/$1" 2>/dev/null || echo -
}

# Server CPU milliseconds per pgbench transaction of a tag (all rounds
# pooled), or "-": a measure of work that other load on the machine
# disturbs much less than it disturbs tx/s.
cpu_per_tx() {
    awk -v hz="$(getconf CLK_TCK)" '{ t += $1; n += $2 }
         END { if (n > 0) printf "%.3f\n", t * 1000 / hz / n; else print "-" }' \
        "$WORK/wal/$1.cpu" 2>/dev/null || echo -
}

# Append a result row: label clients tps mult tag ratio basis [spread].
emit_row() {
    local label="$1" clients="$2" tps="$3" mult="$4" tag="$5" rat="$6" basis="$7" spread="${8:-}"
    local cps p50 p99 wal cpu
    read -r p50 p99 <<<"$(percentiles "$tag")"
    wal="$(wal_per_tx "$tag")"
    cpu="$(cpu_per_tx "$tag")"
    if [ "$tps" = ERROR ]; then
        cps=- p50=- p99=-
        FAILURES=$((FAILURES + 1))
    elif [ "$mult" = - ]; then
        cps=-
    else
        cps="$(awk -v t="$tps" -v m="$mult" 'BEGIN { printf "%.0f", t * m }')"
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$clients" "$tps" "$cps" "$p50" "$p99" "$rat" "$basis" "$spread" \
        "$wal" "$cpu" >>"$WORK/results.tsv"
}

# compare KEY CLIENTS MULT BASIS  LABEL_A DB_A SCRIPT_A  LABEL_B DB_B SCRIPT_B [pgbench args]
# Runs A and B alternately (A B, B A, ...) and records both rows; the A
# row carries mean(A) / mean(B). A_ARGS / B_ARGS, when set, are extra
# pgbench arguments of one side only.
compare() {
    local key="$1" clients="$2" mult="$3" basis="$4"
    local la="$5" dba="$6" sa="$7" lb="$8" dbb="$9" sb="${10}"
    shift 10
    local r ta="" tb="" ma mb
    local taga="${key}_a_c$clients" tagb="${key}_b_c$clients"
    for ((r = 1; r <= ROUNDS; r++)); do
        if [ $((r % 2)) -eq 1 ]; then
            progress "$la, $clients clients, round $r/$ROUNDS"
            run_pgbench "$taga" "$r" "$dba" "$sa" "$clients" "$SECS" "$@" ${A_ARGS:-}; ta="$ta $TPS"
            progress "$lb, $clients clients, round $r/$ROUNDS"
            run_pgbench "$tagb" "$r" "$dbb" "$sb" "$clients" "$SECS" "$@" ${B_ARGS:-}; tb="$tb $TPS"
        else
            progress "$lb, $clients clients, round $r/$ROUNDS"
            run_pgbench "$tagb" "$r" "$dbb" "$sb" "$clients" "$SECS" "$@" ${B_ARGS:-}; tb="$tb $TPS"
            progress "$la, $clients clients, round $r/$ROUNDS"
            run_pgbench "$taga" "$r" "$dba" "$sa" "$clients" "$SECS" "$@" ${A_ARGS:-}; ta="$ta $TPS"
        fi
    done
    ma="$(mean $ta)"
    mb="$(mean $tb)"
    # The per-round ratios, to show how noisy the machine was.
    local spread
    spread="$(awk -v a="$ta" -v b="$tb" 'BEGIN {
        n = split(a, x, " "); split(b, y, " ")
        for (i = 1; i <= n; i++) {
            if (x[i] == "ERROR" || y[i] == "ERROR" || y[i] == 0) { print "-"; exit }
            r = x[i] / y[i]
            if (i == 1 || r < lo) lo = r
            if (i == 1 || r > hi) hi = r
        }
        if (n > 1) printf "%.2f-%.2f\n", lo, hi }')"
    progress "  -> $la $ma tx/s, $lb $mb tx/s (round ratios $spread)"
    emit_row "$la" "$clients" "$ma" "$mult" "$taga" "$(ratio "$ma" "$mb")" "$basis" "$spread"
    emit_row "$lb" "$clients" "$mb" "$mult" "$tagb" "" ""
}

# compare3 KEY CLIENTS MULT  LABEL_A SCRIPT_A  LABEL_B SCRIPT_B  LABEL_C SCRIPT_C:
# A against two references on $DB, run A B C, C B A, ... Rows: A (ratio
# of B), B, C (ratio of B), and A again with its ratio of C ("<A>, against
# <C>"). Each ratio has its round ratios beside it.
compare3() {
    local key="$1" clients="$2" mult="$3" la="$4" sa="$5" lb="$6" sb="$7" lc="$8" sc="$9"
    local r i ta="" tb="" tc="" ma mb mc
    local tags=("${key}_a_c$clients" "${key}_b_c$clients" "${key}_c_c$clients")
    local labels=("$la" "$lb" "$lc") scripts=("$sa" "$sb" "$sc") order
    for ((r = 1; r <= ROUNDS; r++)); do
        if [ $((r % 2)) -eq 1 ]; then order="0 1 2"; else order="2 1 0"; fi
        for i in $order; do
            progress "${labels[$i]}, $clients clients, round $r/$ROUNDS"
            run_pgbench "${tags[$i]}" "$r" "$DB" "${scripts[$i]}" "$clients" "$SECS"
            case $i in 0) ta="$ta $TPS" ;; 1) tb="$tb $TPS" ;; 2) tc="$tc $TPS" ;; esac
        done
    done
    ma="$(mean $ta)" mb="$(mean $tb)" mc="$(mean $tc)"
    local sab scb sac
    sab="$(round_spread "$ta" "$tb")" scb="$(round_spread "$tc" "$tb")" sac="$(round_spread "$ta" "$tc")"
    progress "  -> $la $ma tx/s, $lb $mb tx/s, $lc $mc tx/s (round ratios to $lb $sab, to $lc $sac)"
    emit_row "$la" "$clients" "$ma" "$mult" "${tags[0]}" "$(ratio "$ma" "$mb")" "$lb" "$sab"
    emit_row "$lb" "$clients" "$mb" "$mult" "${tags[1]}" "" ""
    emit_row "$lc" "$clients" "$mc" "$mult" "${tags[2]}" "$(ratio "$mc" "$mb")" "$lb" "$scb"
    emit_row "$la, against $lc" "$clients" "$ma" "$mult" "${tags[0]}" "$(ratio "$ma" "$mc")" "$lc" "$sac"
}

# round_spread "A1 A2 ..." "B1 B2 ...": lowest-highest of the per-round ratios.
round_spread() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        n = split(a, x, " "); split(b, y, " ")
        for (i = 1; i <= n; i++) {
            if (x[i] == "ERROR" || y[i] == "ERROR" || y[i] == 0) { print "-"; exit }
            r = x[i] / y[i]
            if (i == 1 || r < lo) lo = r
            if (i == 1 || r > hi) hi = r
        }
        if (n > 1) printf "%.2f-%.2f\n", lo, hi }'
}

# compare_scale KEY LABEL SCRIPT MULT [pgbench args]: SCRIPT on the scale store
# against the empty store, at each of SCALE_CLIENTS (A_ARGS/B_ARGS as for compare).
compare_scale() {
    local key="$1" label="$2" script="$3" mult="$4" c
    shift 4
    for c in $SCALE_CLIENTS; do
        compare "$key" "$c" "$mult" empty "$label ($SCALE claims)" "$DB_SCALE" "$script" \
            "$label (empty)" "$DB" "$script" "$@"
    done
}

# single KEY CLIENTS MULT LABEL DB SCRIPT [pgbench args]: SINGLE_ROUNDS runs, mean.
single() {
    local key="$1" clients="$2" mult="$3" label="$4" db="$5" script="$6"
    shift 6
    local r ts="" m tag="${key}_c$clients"
    for ((r = 1; r <= SINGLE_ROUNDS; r++)); do
        progress "$label, $clients clients, round $r/$SINGLE_ROUNDS"
        run_pgbench "$tag" "$r" "$db" "$script" "$clients" "$SECS" "$@"; ts="$ts $TPS"
    done
    m="$(mean $ts)"
    progress "  -> $label $m tx/s"
    emit_row "$label" "$clients" "$m" "$mult" "$tag" "" ""
}

# Before every cell run: vacuum what the earlier runs wrote, in the cell and
# at the store. Otherwise autovacuum of the store's claims and leases (or of
# the unclaimed table, which grows ten times faster) lands on whichever run
# comes next, and in a rotation that is mostly the same scenario.
cell_vacuum() {
    psql_db "$DB_CELL" -c "VACUUM ANALYZE" && psql_db "$DB" -c "VACUUM ANALYZE"
}

# compare_cell CLIENTS: the claimed signup with the lease finished in the
# commit callback and by the background worker, the same protocol by hand
# and the unclaimed INSERT, in an order that rotates every round (A B C D,
# B C D A, ...). Rows: both claimed variants (ratio to by hand), by hand,
# unclaimed, and what claiming adds: p50 and p99 of claimed minus
# unclaimed, ratio claimed / unclaimed.
compare_cell() {
    local c="$1" r i k n=4
    local keys=(claimed worker hand plain)
    local labels=("cell signup, claimed" "cell signup, claimed, worker finishes" "cell signup, by hand"
        "cell signup, unclaimed")
    local scripts=(cell_signup.sql cell_signup_worker.sql cell_signup_hand.sql cell_signup_plain.sql)
    local tps=("" "" "" "")
    for ((r = 1; r <= ROUNDS; r++)); do
        for ((i = 0; i < n; i++)); do
            k=$(((i + r - 1) % n))
            progress "${labels[k]}, $c clients, round $r/$ROUNDS"
            PRE_HOOK=cell_vacuum run_pgbench "cell_${keys[k]}_c$c" "$r" "$DB_CELL" "${scripts[k]}" "$c" "$SECS" \
                -D lease=00000000-0000-0000-0000-000000000000
            tps[k]="${tps[k]} $TPS"
        done
    done
    local m0 m1 m2 m3
    m0="$(mean ${tps[0]})" m1="$(mean ${tps[1]})" m2="$(mean ${tps[2]})" m3="$(mean ${tps[3]})"
    progress "  -> claimed $m0, worker finishes $m1, by hand $m2, unclaimed $m3 tx/s"
    emit_row "${labels[0]}" "$c" "$m0" 3 "cell_claimed_c$c" "$(ratio "$m0" "$m2")" "by hand" \
        "$(round_ratios "${tps[0]}" "${tps[2]}")"
    emit_row "${labels[1]}" "$c" "$m1" 3 "cell_worker_c$c" "$(ratio "$m1" "$m2")" "by hand" \
        "$(round_ratios "${tps[1]}" "${tps[2]}")"
    emit_row "${labels[2]}" "$c" "$m2" 3 "cell_hand_c$c" "" ""
    emit_row "${labels[3]}" "$c" "$m3" 3 "cell_plain_c$c" "" ""
    cell_added "claiming adds (claimed - unclaimed)" "$c" cell_claimed "$m0" "$m3"
    cell_added "worker variant adds (claimed - unclaimed)" "$c" cell_worker "$m1" "$m3"
}

# compare_cell_modes CLIENTS: immediate claims (leased at the end of the
# statement) beside deferred ones (leased at COMMIT), for a signup and for a
# 1000-row INSERT ... SELECT, alternating every round. Rows: each variant,
# the immediate one with its ratio to the deferred one.
compare_cell_modes() {
    local c="$1" r i k n=4
    local keys=(signup_imm signup_def bulk_imm bulk_def)
    local labels=("cell signup, immediate" "cell signup, deferred" "cell 1000-row INSERT, immediate"
        "cell 1000-row INSERT, deferred")
    local scripts=(cell_signup.sql cell_signup_deferred.sql cell_bulk.sql cell_bulk_deferred.sql)
    local mults=(3 3 3000 3000)
    local tps=("" "" "" "")
    for ((r = 1; r <= ROUNDS; r++)); do
        for ((i = 0; i < n; i++)); do
            k=$(((i + r - 1) % n))
            progress "${labels[k]}, $c clients, round $r/$ROUNDS"
            PRE_HOOK=cell_vacuum run_pgbench "cell_${keys[k]}_c$c" "$r" "$DB_CELL" "${scripts[k]}" "$c" "$SECS"
            tps[k]="${tps[k]} $TPS"
        done
    done
    for k in 0 2; do
        local mi md
        mi="$(mean ${tps[k]})" md="$(mean ${tps[k + 1]})"
        progress "  -> ${labels[k]} $mi, deferred $md tx/s"
        emit_row "${labels[k]}" "$c" "$mi" "${mults[k]}" "cell_${keys[k]}_c$c" "$(ratio "$mi" "$md")" "deferred" \
            "$(round_ratios "${tps[k]}" "${tps[k + 1]}")"
        emit_row "${labels[k + 1]}" "$c" "$md" "${mults[k + 1]}" "cell_${keys[k + 1]}_c$c" "" ""
    done
}

# round_ratios "A1 A2 ..." "B1 B2 ...": the lowest and highest Ai / Bi.
round_ratios() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        n = split(a, x, " "); split(b, y, " ")
        for (i = 1; i <= n; i++) {
            if (x[i] == "ERROR" || y[i] == "ERROR" || y[i] == 0) { print "-"; exit }
            r = x[i] / y[i]
            if (i == 1 || r < lo) lo = r
            if (i == 1 || r > hi) hi = r
        }
        if (n > 1) printf "%.2f-%.2f\n", lo, hi }'
}

# cell_added LABEL CLIENTS TAG TPS PLAIN_TPS: p50 and p99 of a claimed run
# minus the unclaimed one, and the throughput ratio.
cell_added() {
    local pc pp d
    read -r -a pc <<<"$(percentiles "$3_c$2")"
    read -r -a pp <<<"$(percentiles "cell_plain_c$2")"
    d="$(awk -v a50="${pc[0]}" -v a99="${pc[1]}" -v b50="${pp[0]}" -v b99="${pp[1]}" 'BEGIN {
        if (a50 == "-" || b50 == "-") print "-\t-"; else printf "%+.2f\t%+.2f\n", a50 - b50, a99 - b99 }')"
    printf '%s\t%s\t-\t-\t%s\t%s\t%s\t\n' "  $1" "$2" "$d" "$(ratio "$4" "$5")" unclaimed \
        >>"$WORK/results.tsv"
}

# verify_functions_of FILE...: the last definitions, in the extension
# scripts FILE... (oldest first), of verify_slice and verify_repair, as SQL
# that replaces them in the cell database.
verify_functions_of() {
    local f
    for f in verify_slice verify_repair; do
        awk -v f="$f" '
            $0 ~ "^CREATE (OR REPLACE )?FUNCTION @extschema@\\." f "\\(" { on = 1; cur = "" }
            on { cur = cur $0 "\n" }
            on && /^\$\$;/ { on = 0; last = cur }
            END { printf "%s", last }' "$@"
    done | sed -e 's/@extschema@/claims_cell/g' -e 's/^CREATE FUNCTION/CREATE OR REPLACE FUNCTION/'
}

# verify_round TAG: one backfill and one verify of the verify table with the
# verify_slice of variant TAG (new, or base with BENCH_VERIFY_BASELINE);
# rows/s appended to TB_<TAG> and TV_<TAG>.
verify_round() {
    local tag="$1" t0 t1 out src
    src="(SELECT type_id FROM claim_source_types WHERE name = 'RAILS_TABLE_ORGANIZATIONS')"
    if [ -n "$VERIFY_BASELINE" ]; then
        psql_db "$DB_CELL" -f "$WORK/verify_slice_$tag.sql" >/dev/null || { VERIFY_OK=0; return; }
    fi
    psql_db "$DB" -c "SET session_replication_role = replica" \
        -c "DELETE FROM claims WHERE creator_id = $CELL_CELL AND source_type = $src" \
        -c "VACUUM ANALYZE claims" >/dev/null
    psql_db "$DB_CELL" -c "SELECT claims_cell.unclaim_column('verify_orgs', 'path')
                             FROM claims_cell.claimed_columns WHERE table_name = 'verify_orgs'::regclass" \
        -c "SELECT claims_cell.claim_column('verify_orgs', 'path', 'ORGANIZATION_PATH', 'ORGANIZATION', 'owner_id', 'RAILS_TABLE_ORGANIZATIONS')" \
        -c CHECKPOINT >/dev/null
    progress "backfill of $VERIFY_ROWS rows ($tag)"
    t0=$(date +%s.%N)
    out="$(psql_val "$DB_CELL" "SET claims_cell.verify_recent = 0; SELECT * FROM claims_cell.verify('verify_orgs', repair => true)")"
    t1=$(date +%s.%N)
    [ "$out" = "$VERIFY_ROWS|0|0|$VERIFY_ROWS|0" ] || { echo "run.sh: backfill counted $out" >&2; VERIFY_OK=0; }
    eval "TB_$tag=\"\$TB_$tag \$(awk -v a=$t0 -v b=$t1 -v n=$VERIFY_ROWS 'BEGIN { printf \"%.0f\", n / (b - a) }')\""
    psql_db "$DB_CELL" -c "VACUUM ANALYZE" -c CHECKPOINT >/dev/null
    progress "verify of $VERIFY_ROWS rows, nothing to repair ($tag)"
    t0=$(date +%s.%N)
    out="$(psql_val "$DB_CELL" "SET claims_cell.verify_recent = 0; SELECT * FROM claims_cell.verify('verify_orgs')")"
    t1=$(date +%s.%N)
    [ "$out" = "0|0|0|0|0" ] || { echo "run.sh: verify counted $out" >&2; VERIFY_OK=0; }
    eval "TV_$tag=\"\$TV_$tag \$(awk -v a=$t0 -v b=$t1 -v n=$VERIFY_ROWS 'BEGIN { printf \"%.0f\", n / (b - a) }')\""
}

# Verify: a column claimed after it held VERIFY_ROWS rows, then its
# backfill (claims_cell.verify(table, repair => true)) and a verify that
# finds nothing to repair, timed from the client; rows per second of each,
# ROUNDS times. Between rounds the store forgets the claims (deleted there
# directly) and the column is claimed afresh. With BENCH_VERIFY_BASELINE
# (older extension scripts), each round also runs their verify_slice and
# verify_repair, swapped in with CREATE OR REPLACE on the same data, in
# A B B A order, and the rows report both.
run_verify() {
    local r order tag
    TB_new="" TV_new="" TB_base="" TV_base="" VERIFY_OK=1
    psql_db "$DB_CELL" -c "CREATE TABLE verify_orgs (id bigint PRIMARY KEY, path text, owner_id bigint)" \
        -c "INSERT INTO verify_orgs SELECT i, 'verify-$RUN_BASE-' || i, i FROM generate_series(1, $VERIFY_ROWS) i" \
        -c "VACUUM ANALYZE verify_orgs" >/dev/null || { FAILURES=$((FAILURES + 1)); return; }
    if [ -n "$VERIFY_BASELINE" ]; then
        # shellcheck disable=SC2086
        verify_functions_of $VERIFY_BASELINE >"$WORK/verify_slice_base.sql"
        # shellcheck disable=SC2046
        verify_functions_of $(ls "$("$PG_CONFIG" --sharedir)"/extension/claims_cell--*--*.sql | sort -V) \
            >"$WORK/verify_slice_new.sql"
        [ "$(grep -c '^CREATE OR REPLACE FUNCTION' "$WORK/verify_slice_base.sql")" = 2 ] &&
            [ "$(grep -c '^CREATE OR REPLACE FUNCTION' "$WORK/verify_slice_new.sql")" = 2 ] ||
            { echo "run.sh: no verify_slice in $VERIFY_BASELINE or the installed scripts" >&2; FAILURES=$((FAILURES + 1)); return; }
    fi
    for ((r = 1; r <= ROUNDS; r++)); do
        order=new
        if [ -n "$VERIFY_BASELINE" ]; then
            order="base new"
            [ $((r % 2)) = 0 ] && order="new base"
        fi
        for tag in $order; do
            progress "verify section, round $r/$ROUNDS, $tag"
            verify_round "$tag"
        done
    done
    [ -n "$VERIFY_BASELINE" ] && psql_db "$DB_CELL" -f "$WORK/verify_slice_new.sql" >/dev/null
    [ "$VERIFY_OK" = 1 ] || { TB_new="ERROR" TV_new="ERROR" TB_base="ERROR" TV_base="ERROR"; }
    local mb mv
    mb="$(mean $TB_new)" mv="$(mean $TV_new)"
    progress "  -> backfill $mb rows/s, verify $mv rows/s (rounds:$TB_new /$TV_new)"
    VERIFY_BACKFILL="$mb" VERIFY_CHECK="$mv" VERIFY_SPREAD="backfill$TB_new; verify$TV_new"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
        "verify $VERIFY_ROWS rows, nothing to repair" 1 - "$mv" - - "$(ratio "$mv" "$mb")" "backfill" "rows/s:$TV_new" \
        "backfill $VERIFY_ROWS rows (claim_column + verify repair)" 1 - "$mb" - - "" "" "rows/s:$TB_new" \
        >>"$WORK/results.tsv"
    if [ -n "$VERIFY_BASELINE" ]; then
        local bb bv
        bb="$(mean $TB_base)" bv="$(mean $TV_base)"
        progress "  -> baseline: backfill $bb rows/s, verify $bv rows/s (rounds:$TB_base /$TV_base)"
        progress "  -> new over baseline: verify $(ratio "$mv" "$bv") (rounds $(round_ratios "$TV_new" "$TV_base")), backfill $(ratio "$mb" "$bb") (rounds $(round_ratios "$TB_new" "$TB_base"))"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
            "  verify, baseline verify_slice" 1 - "$bv" - - "$(ratio "$mv" "$bv")" "new/base" "rows/s:$TV_base" \
            "  backfill, baseline verify_slice" 1 - "$bb" - - "$(ratio "$mb" "$bb")" "new/base" "rows/s:$TB_base" \
            >>"$WORK/results.tsv"
    fi
    [ "$VERIFY_OK" = 1 ] || FAILURES=$((FAILURES + 1))
}

# Rename: the values each client destroys first.
rename_preload() {
    psql_val "$3" "SELECT bench_preload_rename($1, $2, $RENAME_POOL)"
}

# Contention: clients competing for the hot values; outcomes by SQLSTATE.
run_contention() {
    local out
    psql_db "$DB" -c "TRUNCATE bench_outcome, bench_client_lease"
    progress "contention, $CONT_CLIENTS clients, $NHOT hot values, ${CONT_SECS}s"
    run_pgbench contention 1 "$DB" contention.sql "$CONT_CLIENTS" "$CONT_SECS"
    emit_row "contention (one op per tx)" "$CONT_CLIENTS" "$(mean "$TPS")" - contention "" ""
    out="$WORK/contention.txt"
    psql_db "$DB" -c "
        SELECT op AS operation, sqlstate, sum(n) AS count
        FROM bench_outcome GROUP BY op, sqlstate ORDER BY op, sqlstate" >"$out"
    CONT_DEADLOCKS="$(psql_val "$DB" "SELECT coalesce(sum(n), 0) FROM bench_outcome WHERE sqlstate = '40P01'")"
    CONT_UNEXPECTED="$(psql_val "$DB" "SELECT coalesce(sum(n), 0) FROM bench_outcome
        WHERE sqlstate NOT IN ('00000', '23505', '55P03', 'P0002', '42501', '55000')")"
    # Every leased claim must belong to an outstanding lease of its cell,
    # and every outstanding lease of the contention cells to a client.
    CONT_ORPHANS="$(psql_val "$DB" "
        SELECT count(*) FROM claims c LEFT JOIN claim_leases l ON l.uuid = c.lease_uuid
        WHERE c.bucket_value LIKE 'hot-%' AND c.lease_uuid IS NOT NULL
          AND (l.state IS DISTINCT FROM 'outstanding' OR l.creator_id <> c.creator_id)")"
    CONT_LOST="$(psql_val "$DB" "
        SELECT count(*) FROM claim_leases l
        WHERE l.creator_id BETWEEN 1001 AND 1004 AND l.state = 'outstanding'
          AND NOT EXISTS (SELECT 1 FROM bench_client_lease b WHERE l.uuid = ANY (b.leases))")"
    CONT_LOG_DEADLOCKS="$(grep -c "deadlock detected" "$WORK/server.log")"
}

fmt_table() {
    awk -F'\t' -v md="$1" '
        BEGIN {
            if (md) {
                print "| scenario | clients | tx/s | claims/s | p50 ms | p99 ms | WAL B/tx (FPI) | CPU ms/tx | ratio | round ratios |"
                print "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"
            } else
                printf "%-32s %7s %10s %10s %8s %8s %14s %9s  %-16s %s\n", "scenario", "clients", "tx/s", "claims/s", "p50 ms", "p99 ms", "WAL B/tx (FPI)", "CPU ms/tx", "ratio", "round ratios"
        }
        {
            r = ($7 == "") ? "" : $7 " of " $8
            if (md) printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $10, $11, r, $9
            else printf "%-32s %7s %10s %10s %8s %8s %14s %9s  %-16s %s\n", $1, $2, $3, $4, $5, $6, $10, $11, r, $9
        }' "$WORK/results.tsv"
}

# Targets: print one line per check.
targets() {
    awk -F'\t' '
        function check(name, ok, val) {
            printf "%s %s (%s)\n", ok ? "PASS" : "MISS", name, val
        }
        $8 == "signup floor" && $1 == "signup" && ($2 == 8 || $2 == 16) {
            check("signup, " $2 " clients, >= 1.00 of its floor", $7 >= 1.00, $7 ", rounds " $9) }
        $8 == "signup plpgsql" && $1 == "signup, against signup plpgsql" && ($2 == 8 || $2 == 16) {
            check("signup, " $2 " clients, ahead of the plain PL/pgSQL signup", $7 > 1.00, $7 ", rounds " $9) }
        $8 == "floor" && $1 ~ /^backfill/ { check("backfill, " $2 " clients, >= 0.80 of its floor", $7 >= 0.80, $7) }
        $8 == "floor" && $1 == "lookup" { check("routing lookup, " $2 " clients, >= 0.90 of a plain indexed SELECT", $7 >= 0.90, $7) }
        $8 == "empty" && $1 ~ /^signup/ && $1 !~ /floor/ { check("signup with " scale " claims, " $2 " clients, >= 0.80 of empty", $7 >= 0.80, $7) }
        $8 == "empty" && $1 ~ /^lookup/ && $1 !~ /floor/ { check("lookup with " scale " claims, " $2 " clients, >= 0.80 of empty", $7 >= 0.80, $7) }
        $8 == "empty" && $1 ~ /^list_records/ { check("list_records page with " scale " claims, " $2 " clients, as fast as empty (>= 0.90, noise)", $7 >= 0.90, $7) }
        $8 == "by hand" && $1 == "cell signup, claimed" { hand[$2] = $7; order[++n] = $2 }
        $8 == "unclaimed" && $1 ~ /claiming adds/ { d50[$2] = $5; d99[$2] = $6 }
        END {
            for (i = 1; i <= n; i++) {
                c = order[i]
                check("claimed signup at a cell, " c " clients, >= 0.90 of the same protocol by hand", hand[c] >= 0.90,
                      hand[c] "; claiming adds p50 " d50[c] " ms, p99 " d99[c] " ms over the unclaimed INSERT")
            }
        }
    ' scale="$SCALE" "$WORK/results.tsv"
    if wants contention; then
        if [ "${CONT_DEADLOCKS:-x}" = 0 ] && [ "${CONT_LOG_DEADLOCKS:-x}" = 0 ]; then
            echo "PASS contention: no deadlock (40P01 caught: $CONT_DEADLOCKS, in server log: $CONT_LOG_DEADLOCKS)"
        else
            echo "MISS contention: deadlocks (40P01 caught: ${CONT_DEADLOCKS:-?}, in server log: ${CONT_LOG_DEADLOCKS:-?})"
        fi
        if [ "${CONT_UNEXPECTED:-x}" = 0 ]; then
            echo "PASS contention: no SQLSTATE outside 23505 55P03 P0002 42501 55000"
        else
            echo "MISS contention: ${CONT_UNEXPECTED:-?} outcomes with an undocumented SQLSTATE"
        fi
        if [ "${CONT_ORPHANS:-x}" = 0 ] && [ "${CONT_LOST:-x}" = 0 ]; then
            echo "PASS contention: consistent afterwards (no claim leased by a finished lease, no untracked outstanding lease)"
        else
            echo "MISS contention: inconsistent afterwards (claims under finished leases: ${CONT_ORPHANS:-?}, untracked outstanding leases: ${CONT_LOST:-?})"
        fi
    fi
}

machine() {
    local mem cpu
    mem="$(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
    cpu="$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $NPROC CPUs ($cpu), $mem RAM, kernel $(uname -r)"
    echo "- server: $("$BINDIR/postgres" --version); client: $("$BINDIR/pgbench" --version)"
    echo "- settings: shared_buffers $SHARED_BUFFERS, max_connections 50, fsync on, synchronous_commit on, full_page_writes on, max_wal_size 16GB, checkpoint_timeout 30min; CHECKPOINT before every pgbench run"
    echo "- roles: API scripts connect as bench_cell (the role all benchmark cells are registered with; no superuser, so every call passes the cell check), lookups as bench_router (member of claims_router), floors as the superuser writing the tables directly"
    local so_now
    so_now="$(so_mtime)"
    echo "- extension: $EXT_INFO$([ "$so_now" != "$SO_AT_START" ] && echo "; claims.so was reinstalled during the run ($so_now), the server kept the library it started with")"
    echo "- runs: ${SECS}s per pgbench run, $ROUNDS alternating round(s) per comparison (A B B A ...), pgbench -M prepared, -j min(clients, $NPROC)"
    echo "- database sizes after loading: $DB_SIZES"
    [ -s "$WORK/loadavg" ] && echo "- load during the run (1-minute load average as each pgbench run ended, $(wc -l <"$WORK/loadavg") runs, on $NPROC CPUs): $(sort -n "$WORK/loadavg" | awk '{ v[NR] = $1 } END { printf "min %s, median %s, max %s", v[1], v[int((NR + 1) / 2)], v[NR] }')"
    echo "- data: empty store = $LOOKUP lookup claims + scanned cell ($((SCAN_USERS * 3)) claims, $REC_PAGES pages of <= $RECORD_PAGE) + reconciled cell ($LEASES outstanding leases, $LEASE_PAGES pages of $LEASE_PAGE); scale store = $SCALE bulk claims + the scanned cell"
}

report() {
    local md="$1"
    local elapsed=$(($(date +%s) - STARTED))
    if [ "$md" = 1 ]; then
        echo "# claims benchmark results"
        echo
        echo "Produced by \`make bench\` (bench/run.sh) in $((elapsed / 60))m$((elapsed % 60))s."
        echo
        machine
        echo
        echo "tx/s: pgbench transactions per second (signup, rename and backfill: begin + commit, two"
        echo "round trips and two database transactions; scans: one page). claims/s: values written or"
        echo "read per second. Latency per pgbench transaction, all rounds pooled. ratio: mean tx/s of"
        echo "the row over mean tx/s of its reference, run alternately with it (A B, B A, A B ...):"
        echo "\"floor\" is the same writes or read in plain SQL without validation (generic plans),"
        echo "\"empty\" the same scenario on the empty store. round ratios: lowest and highest ratio"
        echo "of one round's pair, a measure of the machine's noise. WAL B/tx: bytes of WAL"
        echo "written during the row's runs (pg_current_wal_insert_lsn before and after each"
        echo "run, server-wide) over its transactions; in parentheses the part that full-page"
        echo "images took (pg_waldump --stats), the first change of each page after the"
        echo "CHECKPOINT that precedes every run. CPU ms/tx: CPU time of all the server's processes"
        echo "during the row's runs (/proc: the postmaster, its children, and the backends that"
        echo "exited) over its transactions; other load on the machine moves it much less than tx/s."
        echo
        fmt_table 1
        echo
        echo "Notes:"
        echo
        echo "- The floors run with plan_cache_mode = force_generic_plan: left to the plan cache,"
        echo "  PostgreSQL re-plans their data-modifying CTEs on every execution, which would make"
        echo "  the floors slower than plain SQL can be."
        echo "- The floors take their claim and lease uuids from gen_random_uuid(), so their"
        echo "  primary-key inserts land on random index pages; the extension's time-ordered"
        echo "  uuids append at the right edge. That is why the signup floor loses more than the"
        echo "  extension when 5 million claims are loaded."
        echo "- \"signup plpgsql\" is the same lease protocol as plain PL/pgSQL functions over"
        echo "  the store's tables (bench_pl_begin_update and bench_pl_commit in setup.sql: type"
        echo "  names resolved through the registries, SHA-256 digests, lease and claims in"
        echo "  key order; no history, no role check, no statistics), called as the superuser"
        echo "  with generic plans. It runs in rotation with the store and the floor (A B C,"
        echo "  C B A, ...); the row \"signup, against signup plpgsql\" is the store's ratio to it."
        echo "- shared_buffers defaults to a quarter of RAM so that both stores stay cached: on a"
        echo "  virtual machine whose OS page cache does not last, every read outside"
        echo "  shared_buffers goes to the disk, and the scale rows would measure the disk."
        if wants cell; then
            echo "- The cell rows: one INSERT of a user whose username, email and route claims_cell"
            echo "  claims at the end of the statement (immediate), in a cell database on the same server as the store (its"
            echo "  begin_update and commit go over a Unix socket). \"by hand\" is the same lease"
            echo "  protocol in a PL/pgSQL procedure called once per signup, talking to the store"
            echo "  over a persistent dblink connection; \"unclaimed\" the same INSERT into an"
            echo "  identical table nothing claims. The three run in rotating order every round,"
            echo "  each after VACUUM ANALYZE of the cell and the store."
            echo "  \"claiming adds\": p50 and p99 of claimed minus unclaimed, and claimed over"
            echo "  unclaimed tx/s. claims_cell.call_timeout is 5s for the run."
            echo "- The immediate / deferred rows: the same signup, and a 1000-row INSERT ... SELECT"
            echo "  of such users, into users_claimed (immediate: leased at the end of the statement)"
            echo "  and users_deferred (\"deferrable\", initially deferred: leased at COMMIT), at 1"
            echo "  client, alternating every round; the ratio is immediate over deferred."
        fi
        if wants verify; then
            echo "- The verify rows: a table of $VERIFY_ROWS rows in the cell database whose column is"
            echo "  claimed after it was filled. \"backfill\": claims_cell.verify(table, repair => true)"
            echo "  claims every row (leases of 1000 records, committed at COMMIT); \"verify\": the same"
            echo "  call without repair right after, comparing every row with the store and finding"
            echo "  nothing. claims/s is rows per second, timed from the client, one call per round;"
            echo "  the ratio is verify over backfill."
        fi
        echo "- The machine is shared: compare the round ratios before reading much into a"
        echo "  difference of a few percent."
    else
        echo
        fmt_table 0
    fi
    if wants contention && [ -f "$WORK/contention.txt" ]; then
        echo
        if [ "$md" = 1 ]; then
            echo "## Contention outcomes ($CONT_CLIENTS clients, 4 cells, $NHOT hot values, ${CONT_SECS}s)"
            echo
            echo '```'
            cat "$WORK/contention.txt"
            echo '```'
        else
            echo "contention outcomes ($CONT_CLIENTS clients, 4 cells, $NHOT hot values, ${CONT_SECS}s):"
            cat "$WORK/contention.txt"
        fi
    fi
    if wants grpc && [ -s "$WORK/grpc.txt" ]; then
        echo
        if [ "$md" = 1 ]; then
            echo "## claims-grpc against SQL (bench/grpc.sh)"
            echo
            echo '```'
            cat "$WORK/grpc.txt"
            echo '```'
        else
            cat "$WORK/grpc.txt"
        fi
    fi
    echo
    [ "$md" = 1 ] && echo "## Targets" && echo && echo '```'
    targets
    [ "$md" = 1 ] && echo '```'
    return 0
}

main() {
    local c
    start_server
    load_data
    : >"$WORK/results.tsv"

    if wants scale; then
        compare_scale scale_signup signup signup.sql 4
        A_ARGS="-D nlookup=$SCALE" B_ARGS="-D nlookup=$LOOKUP" compare_scale scale_lookup lookup lookup.sql 1
        if [ "$SCALE_FLOORS" = 1 ]; then
            # The same comparison for the floors: what the data size alone costs.
            compare_scale scale_signup_floor "signup floor" signup_floor.sql 4
            A_ARGS="-D nlookup=$SCALE" B_ARGS="-D nlookup=$LOOKUP" \
                compare_scale scale_lookup_floor "lookup floor" lookup_floor.sql 1
        fi
        compare_scale scale_list list_records list_records.sql \
            "$(awk -v a="$REC_ITEMS" -v b="$REC_PAGES" 'BEGIN { print a / b }')" -D page="$RECORD_PAGE"
    fi
    if wants signup; then
        for c in $CLIENTS; do
            compare3 signup "$c" 4 "signup" signup.sql "signup floor" signup_floor.sql \
                "signup plpgsql" signup_plpgsql.sql
        done
    fi
    if wants lookup; then
        for c in $CLIENTS; do
            compare lookup "$c" 1 floor "lookup" "$DB" lookup.sql "lookup floor" "$DB" lookup_floor.sql \
                -D nlookup="$LOOKUP"
        done
    fi
    if wants backfill; then
        for c in $CLIENTS; do
            compare backfill "$c" "$BATCH" floor "backfill $BATCH" "$DB" backfill.sql \
                "backfill $BATCH floor" "$DB" backfill_floor.sql
        done
    fi
    if wants rename; then
        for c in $CLIENTS; do
            PRE_HOOK=rename_preload single rename "$c" 2 "rename" "$DB" rename.sql
        done
    fi
    if wants list_records; then
        for c in $CLIENTS; do
            single list_records "$c" "$(awk -v a="$REC_ITEMS" -v b="$REC_PAGES" 'BEGIN { print a / b }')" \
                "list_records page" "$DB" list_records.sql -D page="$RECORD_PAGE"
        done
    fi
    if wants list_leases; then
        for c in $CLIENTS; do
            single list_leases "$c" "$(awk -v a="$LEASE_ITEMS" -v b="$LEASE_PAGES" 'BEGIN { print a / b }')" \
                "list_leases page" "$DB" list_leases.sql -D page="$LEASE_PAGE"
        done
    fi
    if wants contention; then
        run_contention
    fi
    if wants cell; then
        for c in $CELL_CLIENTS; do
            compare_cell "$c"
        done
        compare_cell_modes 1
    fi
    if wants verify; then
        run_verify
    fi

    if wants grpc; then
        progress "grpc: bench/grpc.sh"
        "$BENCH_DIR/grpc.sh" >"$WORK/grpc.txt" || FAILURES=$((FAILURES + 1))
    fi

    if [ "$PGSS" = 1 ]; then
        psql_db "$DB" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" \
            -c "SELECT calls, round(total_exec_time::numeric, 1) AS total_ms,
                       round(mean_exec_time::numeric, 3) AS mean_ms, rows, left(query, 160) AS query
                FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 30" \
            >"$WORK/pg_stat_statements.txt" 2>&1
        KEEP=1
    fi

    report 0
    if [ -n "$RESULTS_FILE" ]; then
        if report 1 >"$RESULTS_FILE.tmp" 2>/dev/null && mv "$RESULTS_FILE.tmp" "$RESULTS_FILE"; then
            progress "results written to $RESULTS_FILE"
        else
            rm -f "$RESULTS_FILE.tmp"
            progress "could not write $RESULTS_FILE"
        fi
    fi
    progress "done"
    [ "$FAILURES" -eq 0 ]
}

main "$@"
