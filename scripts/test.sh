#!/usr/bin/env bash
# test.sh: build, install and test the claims extension (`make test`).
#
# As root: checks dependencies (scripts/deps.sh), builds and installs the
# extension, copies the work tree into a fresh temporary directory owned by
# the unprivileged "claims" user and runs this same script there as that user.
# As any other user: runs the suites in place, assuming the extension is
# already installed.
#
# Suites, each run even when an earlier one failed:
#   regress   pg_regress over sql/*.sql (expected/*.out), temp instance
#   isolation pg_isolation_regress over test/isolation/specs/*.spec
#             (both as Makefile's installcheck defines them: REGRESS,
#             REGRESS_OPTS, ISOLATION, ISOLATION_OPTS; cell regress as
#             cell/Makefile's)
#   tap       prove over test/t/*.pl (PostgreSQL::Test::Cluster)
#   pgtap     pg_prove over test/pgtap/*.sql, one fresh database per file
#   cell regress, cell tap: the same for claims_cell in cell/
#   monitoring  promtool check rules and promtool test rules over
#             monitoring/*.yml and monitoring/test/rules_test.yml, then
#             prove over monitoring/test/t/*.pl (a real
#             prometheus-postgres-exporter and Prometheus on loopback)
#   ha        prove over ha/test/t/*.pl: the store on three Patroni nodes
#             (etcd, synchronous_mode) and pgbouncer, two cells claiming
#             through failovers; PostgreSQL 15 (Debian 12) only, skipped
#             with a note on other versions
#   cell orm  Django, SQLAlchemy and ActiveRecord applications from Debian's
#             packages against two cells and a store (cell/orm/test/t)
#   grpc      claims-grpc: the descriptor contract test, then prove over
#             grpc/test/t/*.pl, and over test/grpc/t/*.pl (a Python client
#             generated from grpc/proto, python3-grpcio, drives every RPC)
#   package   as root: `make deb`, the package installed with apt on a clean
#             Debian root, a server started, both extensions created and
#             used (scripts/test_package.sh); CLAIMS_PACKAGE_TEST=0 skips it
# A suite with no test files (or, for those of a Makefile, no tests in its
# variable) is skipped with a note. CLAIMS_SUITES, a list
# of suite names (regress isolation tap pgtap cell-regress cell-tap
# monitoring ha cell-orm grpc package), runs only those (default: all); CLAIMS_TAP_FILES, a shell
# pattern, runs only the store's TAP files test/t/PATTERN.pl (default *),
# CLAIMS_CELL_TAP_FILES the cell's cell/test/t/PATTERN.pl (default *; `make
# fuzz` runs 066_random_invariants alone).
# `make test PG=15-cassert` (scripts/test_cassert.sh) uses both.
# After the suites, every "TRAP:" (a failed assertion of a server built
# with --enable-cassert) and every memory-context check warning in the
# server logs is printed with what follows it (the backtrace) and counted
# as one failure; a production server never writes either.
#
# Counting: one pg_regress test or isolation spec is one result; every TAP
# or pgTAP assertion ("ok N" / "not ok N") is one result; a test file or a
# suite that exits non-zero without reporting a failed assertion (it died,
# had a bad plan, could not start its server, timed out) counts one failure.
# The last line printed is always "N passed, N failed"; the exit status is
# non-zero when anything failed.
#
# Environment: PG_CONFIG (default /usr/lib/postgresql/15/bin/pg_config),
# CLAIMS_OS_USER (default claims), CLAIMS_KEEP_TMP=1 keeps the temporary
# copy, CLAIMS_SUITE_TIMEOUT seconds per suite or TAP file (default 1200).
# The copy has no .git: CLAIMS_SOURCE_REPO (default the work tree run as
# root) names the repository whose history cell/test/t/071_released_cell.pl
# builds the released claims_cell 1.4 from.
# shellcheck disable=SC2030,SC2031  # per-suite environments live in subshells
set -u

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
RUN_USER="${CLAIMS_OS_USER:-claims}"
SUITE_TIMEOUT="${CLAIMS_SUITE_TIMEOUT:-1200}"
export PG_CONFIG

PASSED=0
FAILED=0
SKIPPED_NOTES=()
WORK=""
PGTAP_DIR=""
PGTAP_SOCK=""
PGTAP_PORT=""

# Print a section header.
section() {
    echo
    echo "=== $* ==="
}

# Print the closing summary line and exit with the matching status.
finish() {
    echo
    if [ "${#SKIPPED_NOTES[@]}" -gt 0 ]; then
        printf 'note: %s\n' "${SKIPPED_NOTES[@]}"
    fi
    if [ -n "${CLAIMS_TEST_SUMMARY_FILE:-}" ]; then
        echo "$PASSED $FAILED" >"$CLAIMS_TEST_SUMMARY_FILE" 2>/dev/null || true
    fi
    echo "$PASSED passed, $FAILED failed"
    if [ "$FAILED" -gt 0 ]; then
        exit 1
    fi
    exit 0
}

# Print the first N lines of a file (if it exists) under a heading.
show_head() {
    local file="$1" lines="$2"
    [ -s "$file" ] || return 0
    echo "----- $file (first $lines lines) -----"
    head -n "$lines" "$file"
    echo "----- end of $file -----"
}

# Print the last N lines of a file (if it exists) under a heading.
show_tail() {
    local file="$1" lines="$2"
    [ -s "$file" ] || return 0
    echo "----- $file (last $lines lines) -----"
    tail -n "$lines" "$file"
    echo "----- end of $file -----"
}

# Count pg_regress / pg_isolation_regress result lines of a log file.
# Prints "passed failed". Handles PG15's "test name ... ok" (and parallel
# "     name ... ok") as well as the newer "ok N - name" / "not ok N - name".
count_regress() {
    awk '
        /^[ \t]*(test[ \t]+)?[^ \t]+[ \t]+\.\.\.[ \t]+ok([ \t]|$)/          { p++; next }
        /^[ \t]*(test[ \t]+)?[^ \t]+[ \t]+\.\.\.[ \t]+failed \(ignored\)/   { p++; next }
        /^[ \t]*(test[ \t]+)?[^ \t]+[ \t]+\.\.\.[ \t]+(FAILED|failed)/      { f++; next }
        /^not ok[ \t]+[0-9]+/                                               { f++; next }
        /^ok[ \t]+[0-9]+/                                                   { p++; next }
        END { print p + 0, f + 0 }
    ' "$1"
}

# Count top-level TAP assertions of a log file. Prints "passed failed skipped".
# "# SKIP" and failing "# TODO" assertions count as skipped; indented
# (subtest) lines are left to their summarising parent line.
count_tap() {
    awk '
        {
            line = $0
            sub(/^[^ \t]+ \.\.+ /, "", line)   # prove may put "file .. " first
            low = tolower(line)
        }
        line ~ /^not ok[ \t]+[0-9]+/ { if (low ~ /#[ \t]*todo/) s++; else f++; next }
        line ~ /^ok[ \t]+[0-9]+/     { if (low ~ /#[ \t]*skip/) s++; else p++; next }
        END { print p + 0, f + 0, s + 0 }
    ' "$1"
}

# Stop every server this run started and remove the pgTAP socket
# directory (EXIT trap of the suites).
# shellcheck disable=SC2317  # invoked by trap
cleanup_user() {
    stop_stray_servers_any
    if [ -n "$PGTAP_SOCK" ] && [ -d "$PGTAP_SOCK" ]; then
        rm -rf "$PGTAP_SOCK"
    fi
}

# Stop PostgreSQL servers left running in this tree's temporary instances
# (pg_regress, isolation, TAP nodes, pgTAP) by their postmaster.pid files.
# shellcheck disable=SC2317  # also called from the EXIT trap
stop_stray_servers_any() {
    local pidfile datadir
    while IFS= read -r pidfile; do
        datadir="$(dirname "$pidfile")"
        "$BINDIR/pg_ctl" -D "$datadir" -m immediate -w stop >/dev/null 2>&1 || true
    done < <(find "$REPO"/tmp_check* "$REPO"/cell/tmp_check* "$REPO"/monitoring/tmp_check* -maxdepth 3 -name postmaster.pid 2>/dev/null)
}

# Set the environment every suite shares: PostgreSQL's bin first on PATH,
# a fixed UTF-8 C locale, and no libpq settings inherited from outside.
setup_env() {
    BINDIR="$("$PG_CONFIG" --bindir)" || return 1
    PKGLIBDIR="$("$PG_CONFIG" --pkglibdir)" || return 1
    SHAREDIR="$("$PG_CONFIG" --sharedir)" || return 1
    PGXS_DIR="$PKGLIBDIR/pgxs"
    export PATH="$BINDIR:$PATH"
    export LANG=C.UTF-8
    unset LC_ALL LC_CTYPE LC_COLLATE LC_MESSAGES LC_MONETARY LC_NUMERIC LC_TIME LANGUAGE
    unset PGHOST PGHOSTADDR PGPORT PGUSER PGDATABASE PGSERVICE PGOPTIONS PGPASSWORD \
        PGPASSFILE PGSSLMODE PGAPPNAME PGDATA
    export TMPDIR="${TMPDIR:-/tmp}"
    if [ ! -d "$TMPDIR" ] || [ ! -w "$TMPDIR" ]; then
        export TMPDIR=/tmp
    fi
    LOGDIR="$REPO/tmp_check_runner"
    rm -rf "$LOGDIR"
    mkdir -p "$LOGDIR"
    TEMP_CONFIG_FILE=""
    if [ -f "$REPO/test/claims.conf" ]; then
        TEMP_CONFIG_FILE="$REPO/test/claims.conf"
    fi
}

# Whether the suite named $1 is to run (CLAIMS_SUITES, default all).
want_suite() {
    [ -z "${CLAIMS_SUITES:-}" ] && return 0
    [[ " $CLAIMS_SUITES " == *" $1 "* ]]
}

# Record the outcome of a suite or file in the totals.
add_counts() {
    PASSED=$((PASSED + $1))
    FAILED=$((FAILED + $2))
}

# Judge one pg_regress-style run: print "passed failed" on stdout (a run
# that failed without a failed test, or reported nothing, counts one
# failure) and its diffs and server log on stderr when anything failed.
# Arguments: exit status, output file, tool name, unit name, output dir.
judge_regress_run() {
    local rc=$1 out=$2 tool=$3 unit=$4 dir=$5 p fl
    read -r p fl < <(count_regress "$out")
    {
        if [ "$rc" -ne 0 ] && [ "$fl" -eq 0 ]; then
            echo
            echo "$tool exited with status $rc without a failed $unit; counted as one failure"
            [ "$rc" -eq 124 ] && echo "(timed out after ${SUITE_TIMEOUT}s)"
            fl=1
        fi
        if [ "$rc" -eq 0 ] && [ $((p + fl)) -eq 0 ]; then
            echo "$tool reported no results; counted as one failure"
            fl=1
        fi
        if [ "$fl" -gt 0 ]; then
            show_head "$dir/regression.diffs" 200
            if [ -s "$dir/log/postmaster.log" ]; then
                show_tail "$dir/log/postmaster.log" 60
            else
                show_tail "$dir/log/initdb.log" 30
            fi
        fi
    } >&2
    echo "$p $fl"
}

# The value of a variable of DIR's Makefile: make_var DIR NAME.
make_var() {
    make -s --no-print-directory -C "$1" -f Makefile -f - "print-$2" <<'MAKE'
print-%:
	@echo $($*)
MAKE
}

# One suite of a Makefile's installcheck (PGXS), as that Makefile defines
# it: REGRESS with REGRESS_OPTS, or ISOLATION with ISOLATION_OPTS, each on
# the private server its options start. The other kinds are switched off
# for the run (the TAP files run file by file in prove_suite).
# makefile_suite LABEL DIR KIND(REGRESS|ISOLATION) LOGNAME OUTPUTDIR TOOL UNIT
makefile_suite() {
    local label=$1 dir=$2 kind=$3 logname=$4 outdir=$5 tool=$6 unit=$7 rel tests out p fl
    local off=(TAP_TESTS=)
    rel="${dir#"$REPO"}"
    rel="${rel#/}"
    section "$label (make installcheck ${rel:+-C $rel }$kind)"
    tests="$(make_var "$dir" "$kind")" || tests=""
    if [ -z "$tests" ]; then
        echo "${rel:+$rel/}Makefile defines no $kind tests; skipped"
        SKIPPED_NOTES+=("$label suite skipped: ${rel:+$rel/}Makefile defines no $kind tests")
        return 0
    fi
    if [ "$kind" = REGRESS ]; then off+=(ISOLATION=); else off+=(REGRESS=); fi
    rm -rf "$outdir/results" "$outdir/log" "$outdir/regression.diffs" "$outdir/regression.out"
    [ "$kind" = ISOLATION ] && rm -rf "$outdir"
    out="$LOGDIR/$logname.out"
    timeout --foreground --kill-after=30 "$SUITE_TIMEOUT" \
        make --no-print-directory -C "$dir" PG_CONFIG="$PG_CONFIG" "${off[@]}" installcheck 2>&1 | tee "$out"
    read -r p fl < <(judge_regress_run "${PIPESTATUS[0]}" "$out" "$tool" "$unit" "$outdir")
    echo "-- $label: $p ok, $fl not ok"
    add_counts "$p" "$fl"
    stop_stray_servers_any
}

# Suite (a): pg_regress over sql/*.sql (the store), Makefile's REGRESS.
run_regress() {
    makefile_suite regress "$REPO" REGRESS regress "$REPO" pg_regress test
}

# Suite (b): pg_isolation_regress over test/isolation/specs/*.spec,
# Makefile's ISOLATION.
run_isolation() {
    makefile_suite isolation "$REPO" ISOLATION isolation "$REPO/output_iso" pg_isolation_regress spec
}

# prove over DIR/test/t/*.pl, one prove per file, with the environment of
# PGXS's prove_installcheck: prove_suite LABEL DIR LOGPREFIX PGPORT
# [TEMP_CONFIG file every PostgreSQL::Test::Cluster node appends]
# [PATTERN of the file names to run, without .pl; default *]
# [directory of the files under DIR; default test/t].
prove_suite() {
    local label=$1 dir=$2 prefix=$3 port=$4 conf=${5:-} pattern=${6:-*} tdir=${7:-test/t} rel
    local files=() f name out rc p fl s tp=0 tf=0 ts=0
    rel="${dir#"$REPO"}"
    rel="${rel#/}"
    section "$label (prove ${rel:+$rel/}$tdir)"
    # shellcheck disable=SC2231  # the pattern is meant to glob
    for f in "$dir"/$tdir/$pattern.pl; do
        [ -e "$f" ] && files+=("$tdir/${f##*/}")
    done
    if [ "${#files[@]}" -eq 0 ]; then
        echo "no TAP files ${rel:+$rel/}$tdir/$pattern.pl; skipped"
        SKIPPED_NOTES+=("$label suite skipped: no ${rel:+$rel/}$tdir/$pattern.pl")
        return 0
    fi
    # files outside test/t keep their data and logs apart (tmp_check_PREFIX)
    local tmp="$dir/tmp_check"
    [ "$tdir" = test/t ] || tmp="$dir/tmp_check_$prefix"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    for f in "${files[@]}"; do
        name="$(basename "$f" .pl)"
        out="$LOGDIR/${prefix}_$name.out"
        (
            cd "$dir" || exit 1
            # TESTLOGDIR: PostgreSQL 17 writes the logs to ./log without it
            export TESTDIR="$dir" TESTDATADIR="$tmp" TESTLOGDIR="$tmp/log"
            export PATH="$BINDIR:$dir:$PATH" PGPORT="$port"
            export PG_REGRESS="$PGXS_DIR/src/test/regress/pg_regress"
            [ -n "$conf" ] && export TEMP_CONFIG="$conf"
            timeout --foreground --kill-after=30 "$SUITE_TIMEOUT" \
                prove -v --merge -I "$PGXS_DIR/src/test/perl/" -I "$dir" "$f"
        ) 2>&1 | tee "$out"
        rc=${PIPESTATUS[0]}
        read -r p fl s < <(count_tap "$out")
        if [ "$rc" -ne 0 ] && [ "$fl" -eq 0 ]; then
            echo "${rel:+$rel/}$f: prove exited with status $rc without a failed assertion (died, bad plan or timeout); counted as one failure"
            fl=1
        fi
        if [ "$fl" -gt 0 ]; then
            show_tail "$tmp/log/regress_log_$name" 80
            local nodelog
            for nodelog in "$tmp"/log/"${name}"_*.log "$tmp"/log/claims_grpc*.log; do
                show_tail "$nodelog" 40
            done
        fi
        tp=$((tp + p))
        tf=$((tf + fl))
        ts=$((ts + s))
    done
    echo "-- $label: $tp ok, $tf not ok, $ts skipped/todo"
    add_counts "$tp" "$tf"
    stop_stray_servers_any
}

# Suite (c): prove over test/t/*.pl, or those CLAIMS_TAP_FILES matches
# (plus TEMP_CONFIG so every node preloads claims unless a test overrides it).
run_tap() {
    prove_suite tap "$REPO" tap 65432 "$TEMP_CONFIG_FILE" "${CLAIMS_TAP_FILES:-*}"
}

# Suite (k): claims-grpc. grpc/test/contract.sh (the .proto files against
# GitLab's reference descriptor set), then prove over grpc/test/t/*.pl (the
# server in front of a store node, certificates made with openssl).
run_grpc() {
    local out="$LOGDIR/grpc_contract.out" rc p fl s
    section "grpc contract (grpc/test/contract.sh)"
    "$REPO/grpc/test/contract.sh" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    read -r p fl s < <(count_tap "$out")
    if [ "$rc" -ne 0 ] && [ "$fl" -eq 0 ]; then
        echo "grpc/test/contract.sh exited with status $rc without a failed assertion; counted as one failure"
        fl=1
    fi
    echo "-- grpc contract: $p ok, $fl not ok"
    add_counts "$p" "$fl"
    prove_suite grpc "$REPO/grpc" grpc 64432 "$TEMP_CONFIG_FILE"
    run_grpc_clients
}

# Suite (e): pg_regress over cell/sql/*.sql (claims_cell), cell/Makefile's
# REGRESS with its own temp instance and cell/test/claims_cell.conf.
run_cell_regress() {
    makefile_suite "cell regress" "$REPO/cell" REGRESS cell_regress "$REPO/cell" pg_regress test
}

# Suite (f): prove over cell/test/t/*.pl, or those CLAIMS_CELL_TAP_FILES
# matches, a store node and a cell node each.
run_cell_tap() {
    prove_suite "cell tap" "$REPO/cell" cell_tap 65032 "" "${CLAIMS_CELL_TAP_FILES:-*}"
}

# One promtool run as one result: monitoring_check LABEL promtool-args...
monitoring_check() {
    local label=$1 out
    shift
    out="$LOGDIR/monitoring_promtool_${label}.out"
    if (cd "$REPO/monitoring" && promtool "$@") >"$out" 2>&1; then
        echo "ok - promtool $*"
        add_counts 1 0
    else
        echo "not ok - promtool $*"
        cat "$out"
        add_counts 0 1
    fi
}

# Suite (g): the Prometheus rules (promtool check rules, promtool test
# rules), then the end-to-end TAP files monitoring/test/t/*.pl.
run_monitoring() {
    section "monitoring (promtool over monitoring/)"
    if ! command -v promtool >/dev/null 2>&1; then
        echo "-- monitoring: promtool is not installed (scripts/deps.sh installs prometheus); counted as one failure"
        add_counts 0 1
    else
        monitoring_check check check rules recording.yml alerts.yml
        monitoring_check test test rules test/rules_test.yml
    fi
    prove_suite monitoring "$REPO/monitoring" monitoring 64832
}

# Suite (h): prove over ha/test/t/*.pl, PostgreSQL 15 only (deps.sh
# installs Patroni, etcd and pgbouncer from Debian 12 only).
run_ha() {
    local major
    major="$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')"
    if [ "$major" != 15 ]; then
        echo "ha suite skipped: it runs on PostgreSQL 15 (Debian 12) only"
        SKIPPED_NOTES+=("ha suite skipped: PostgreSQL $major (it runs on 15, Debian 12, only)")
        return 0
    fi
    prove_suite ha "$REPO/ha" ha 64632
}

# Suite (i): the ORM applications of cell/orm against two cells and a store.
run_cell_orm() {
    prove_suite "cell orm" "$REPO/cell/orm" cell_orm 65232
}

# Part of suite (k): prove over test/grpc/t/*.pl. Each file starts its own store
# node and claims-grpc (grpc/build/claims-grpc of this tree, else the installed
# one) and drives it with test/grpc/grpc_helper.py under /usr/bin/python3.
run_grpc_clients() {
    prove_suite "grpc clients" "$REPO" grpc_clients 65332 "" '*' test/grpc/t
}

# Start the throwaway server for pgTAP: data under tmp_check_pgtap/, no TCP,
# its socket in a private directory under $TMPDIR (short enough for a socket path).
start_pgtap_server() {
    PGTAP_DIR="$REPO/tmp_check_pgtap"
    rm -rf "$PGTAP_DIR"
    mkdir -p "$PGTAP_DIR" || return 1
    PGTAP_SOCK="$(mktemp -d "$TMPDIR/claims-pgtap.XXXXXX")" || return 1
    PGTAP_PORT=$((50000 + $$ % 10000))
    local superuser
    superuser="$(id -un)"
    if ! "$BINDIR/initdb" -D "$PGTAP_DIR/data" -U "$superuser" -A trust -E UTF8 \
        >"$PGTAP_DIR/initdb.log" 2>&1; then
        echo "initdb failed"
        show_tail "$PGTAP_DIR/initdb.log" 40
        return 1
    fi
    {
        echo
        echo "# claims test runner"
        [ -n "$TEMP_CONFIG_FILE" ] && cat "$TEMP_CONFIG_FILE"
        grep -q "shared_preload_libraries" "${TEMP_CONFIG_FILE:-/dev/null}" 2>/dev/null ||
            echo "shared_preload_libraries = 'claims'"
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$PGTAP_SOCK'"
        echo "port = $PGTAP_PORT"
        echo "fsync = off"
    } >>"$PGTAP_DIR/data/postgresql.conf"
    if ! "$BINDIR/pg_ctl" -D "$PGTAP_DIR/data" -l "$PGTAP_DIR/server.log" -w -t 120 start \
        >"$PGTAP_DIR/pg_ctl.log" 2>&1; then
        echo "the pgTAP server did not start"
        show_tail "$PGTAP_DIR/pg_ctl.log" 20
        show_tail "$PGTAP_DIR/server.log" 60
        return 1
    fi
    export PGHOST="$PGTAP_SOCK" PGPORT="$PGTAP_PORT" PGUSER="$superuser"
}

# Stop the pgTAP server.
stop_pgtap_server() {
    if [ -n "$PGTAP_DIR" ] && [ -f "$PGTAP_DIR/data/postmaster.pid" ]; then
        "$BINDIR/pg_ctl" -D "$PGTAP_DIR/data" -m fast -w stop >/dev/null 2>&1 ||
            "$BINDIR/pg_ctl" -D "$PGTAP_DIR/data" -m immediate -w stop >/dev/null 2>&1
    fi
    unset PGHOST PGPORT PGUSER
}

# Suite (d): pg_prove over test/pgtap/*.sql; each file gets a fresh
# database with the pgtap and claims extensions already created.
run_pgtap() {
    local files=() f name db out rc p fl s tp=0 tf=0 ts=0 i=0
    section "pgtap (pg_prove test/pgtap)"
    for f in "$REPO"/test/pgtap/*.sql; do
        [ -e "$f" ] && files+=("test/pgtap/${f##*/}")
    done
    if [ "${#files[@]}" -eq 0 ]; then
        echo "no pgTAP files in test/pgtap/; skipped"
        SKIPPED_NOTES+=("pgtap suite skipped: no test/pgtap/*.sql")
        return 0
    fi
    if ! start_pgtap_server; then
        echo "-- pgtap: could not start a server; counted as one failure"
        add_counts 0 1
        return 0
    fi
    for f in "${files[@]}"; do
        i=$((i + 1))
        name="$(basename "$f" .sql)"
        db="pgtap_${i}"
        out="$LOGDIR/pgtap_$name.out"
        echo "$f"
        if ! "$BINDIR/createdb" "$db" >"$out" 2>&1 ||
            ! "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d "$db" \
                -c 'CREATE EXTENSION pgtap' -c 'CREATE EXTENSION claims' >>"$out" 2>&1; then
            cat "$out"
            echo "$f: could not prepare database $db; counted as one failure"
            show_tail "$PGTAP_DIR/server.log" 40
            tf=$((tf + 1))
            continue
        fi
        (cd "$REPO" && timeout --foreground --kill-after=30 "$SUITE_TIMEOUT" \
            pg_prove -v --merge --psql-bin "$BINDIR/psql" -d "$db" "$f") 2>&1 | tee "$out"
        rc=${PIPESTATUS[0]}
        read -r p fl s < <(count_tap "$out")
        if [ "$rc" -ne 0 ] && [ "$fl" -eq 0 ]; then
            echo "$f: pg_prove exited with status $rc without a failed assertion (SQL error, bad plan or timeout); counted as one failure"
            fl=1
            show_tail "$PGTAP_DIR/server.log" 40
        fi
        "$BINDIR/dropdb" --if-exists "$db" >/dev/null 2>&1 || true
        tp=$((tp + p))
        tf=$((tf + fl))
        ts=$((ts + s))
    done
    stop_pgtap_server
    echo "-- pgtap: $tp ok, $tf not ok, $ts skipped/todo"
    add_counts "$tp" "$tf"
}

# Server logs of this run: pg_regress's and isolation's log/postmaster.log,
# the TAP nodes' tmp_check/log/<test>_<node>.log (not the tests' own
# regress_log_*), the pgTAP server's server.log.
server_logs() {
    find "$REPO" -path "$LOGDIR" -prune -o -type f -name '*.log' ! -name 'regress_log_*' -print 2>/dev/null
}

# Failed assertions ("TRAP: ..." with the backtrace after it) and
# memory-context check warnings (both only from a server built with
# --enable-cassert) in the server logs: each printed with the 30 lines
# after it and counted as one failure.
check_assertions() {
    local log n total=0 pattern='^TRAP: |problem in (alloc set|Generation|slab) '
    section "assertions (TRAP and memory-context checks in the server logs)"
    while IFS= read -r log; do
        n=$(grep -c -E "$pattern" "$log")
        [ "$n" -gt 0 ] || continue
        total=$((total + n))
        echo "----- $log: $n -----"
        grep -n -A 30 -E "$pattern" "$log"
        echo "----- end of $log -----"
    done < <(server_logs | sort)
    echo "-- assertions: $total in the server logs"
    add_counts 0 "$total"
}

# Check that the extension is installed for PG_CONFIG's server.
check_installed() {
    if [ ! -f "$SHAREDIR/extension/claims.control" ] || [ ! -f "$PKGLIBDIR/claims.so" ] ||
        [ ! -f "$SHAREDIR/extension/claims_cell.control" ] || [ ! -f "$PKGLIBDIR/claims_cell.so" ]; then
        echo "test.sh: the claims and claims_cell extensions are not installed in $SHAREDIR / $PKGLIBDIR"
        echo "test.sh: run 'make install' as root (or run 'make test' as root)"
        return 1
    fi
}

# Unprivileged run: every suite, in place.
main_user() {
    if ! "$REPO/scripts/deps.sh"; then
        echo "test.sh: dependencies are missing"
        add_counts 0 1
        finish
    fi
    if ! setup_env; then
        echo "test.sh: cannot run $PG_CONFIG"
        add_counts 0 1
        finish
    fi
    trap cleanup_user EXIT
    trap 'exit 130' INT TERM
    if ! check_installed; then
        add_counts 0 1
        finish
    fi
    echo "test.sh: testing $REPO as $(id -un) with $PG_CONFIG"
    want_suite regress && run_regress
    want_suite isolation && run_isolation
    want_suite tap && run_tap
    want_suite pgtap && run_pgtap
    want_suite cell-regress && run_cell_regress
    want_suite cell-tap && run_cell_tap
    want_suite monitoring && run_monitoring
    want_suite ha && run_ha
    want_suite cell-orm && run_cell_orm
    want_suite grpc && run_grpc
    check_assertions
    finish
}

# Stop servers still running in the temporary copy (the unprivileged run
# was killed before its own cleanup), then remove the copy (EXIT trap of the
# root run).
# shellcheck disable=SC2317  # invoked by trap
cleanup_root() {
    local pidfile
    if [ -n "$WORK" ] && [ -d "$WORK/repo" ]; then
        while IFS= read -r pidfile; do
            runuser -u "$RUN_USER" -- "$("$PG_CONFIG" --bindir)/pg_ctl" \
                -D "$(dirname "$pidfile")" -m immediate -w stop >/dev/null 2>&1 || true
        done < <(find "$WORK"/repo/tmp_check* "$WORK"/repo/cell/tmp_check* "$WORK"/repo/monitoring/tmp_check* \
            -maxdepth 3 -name postmaster.pid 2>/dev/null)
    fi
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        if [ "${CLAIMS_KEEP_TMP:-0}" != 1 ]; then
            rm -rf "$WORK"
        fi
    fi
}

# Build and install the extensions and build claims-grpc from the work
# tree (root, scripts/build.sh).
build_and_install() {
    echo "test.sh: building and installing with $PG_CONFIG"
    PG_CONFIG="$PG_CONFIG" "$REPO/scripts/build.sh" "$WORK/build.log" || {
        echo "test.sh: build or install failed"
        return 1
    }
}

# Copy the work tree, without VCS data and test output, to $1.
copy_tree() {
    mkdir -p "$1" || return 1
    tar -C "$REPO" --anchored \
        --exclude=./.git --exclude=./build --exclude='./tmp_check*' --exclude='./cell/tmp_check*' \
        --exclude='./monitoring/tmp_check*' \
        --exclude=./results --exclude=./cell/results --exclude=./cell/log \
        --exclude=./output_iso --exclude=./log --exclude=./.run \
        --exclude=./regression.diffs --exclude=./regression.out \
        -cf - . | tar -C "$1" -xf -
}

# Root run: deps, build, install, then the suites as the unprivileged user.
main_root() {
    local rc summary
    if ! "$REPO/scripts/deps.sh"; then
        echo "test.sh: could not install dependencies"
        add_counts 0 1
        finish
    fi
    WORK="$(mktemp -d /tmp/claims-test.XXXXXX)" || {
        add_counts 0 1
        finish
    }
    trap cleanup_root EXIT
    trap 'exit 130' INT TERM
    if [ "${CLAIMS_KEEP_TMP:-0}" = 1 ]; then
        echo "test.sh: keeping the temporary copy $WORK"
    fi
    if ! build_and_install; then
        add_counts 0 1
        finish
    fi
    if ! copy_tree "$WORK/repo"; then
        echo "test.sh: could not copy the work tree"
        add_counts 0 1
        finish
    fi
    summary="$WORK/summary"
    mkdir -p "$WORK/tmp"
    chown -R "$RUN_USER:" "$WORK" || {
        add_counts 0 1
        finish
    }
    cd "$WORK/repo" || exit 1
    runuser -u "$RUN_USER" -- env TMPDIR="$WORK/tmp" PG_CONFIG="$PG_CONFIG" \
        CLAIMS_TEST_SUMMARY_FILE="$summary" CLAIMS_SUITE_TIMEOUT="$SUITE_TIMEOUT" \
        CLAIMS_SUITES="${CLAIMS_SUITES:-}" CLAIMS_TAP_FILES="${CLAIMS_TAP_FILES:-*}" \
        CLAIMS_CELL_TAP_FILES="${CLAIMS_CELL_TAP_FILES:-*}" \
        CLAIMS_SOURCE_REPO="${CLAIMS_SOURCE_REPO:-$REPO}" \
        bash "$WORK/repo/scripts/test.sh"
    rc=$?
    cd / || true
    if [ ! -s "$summary" ]; then
        echo "test.sh: the test run as $RUN_USER did not finish (status $rc)"
        add_counts 0 1
        finish
    fi
    local p f
    read -r p f <"$summary"
    add_counts "$p" "$f"
    [ "${CLAIMS_PACKAGE_TEST:-1}" = 0 ] || ! want_suite package || run_package
    finish
}

# Suite (j), as root: `make deb` for this PostgreSQL, then the package
# installed on a clean Debian root (scripts/test_package.sh). Skipped with
# CLAIMS_PACKAGE_TEST=0 (the Debian 13 run does it from the host).
run_package() {
    local major deb out p f
    section "package (make deb, installed on a clean root)"
    major="$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')"
    out="$WORK/package.out"
    if ! CLAIMS_DEB_OUT="$WORK/deb" "$REPO/scripts/deb.sh"; then
        echo "test.sh: make deb failed"
        add_counts 0 1
        return
    fi
    deb="$(ls "$WORK"/deb/postgresql-"$major"-claims_*.deb 2>/dev/null | head -n 1)"
    "$REPO/scripts/test_package.sh" "$major" "$deb" 2>&1 | tee "$out"
    if [[ "$(tail -n 1 "$out")" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        add_counts "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
    else
        echo "test.sh: the package test did not finish"
        add_counts 0 1
    fi
}

if [ "$(id -u)" -eq 0 ]; then
    main_root
else
    main_user
fi
