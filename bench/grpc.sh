#!/usr/bin/env bash
# bench/grpc.sh: BeginUpdate + CommitUpdate pairs through claims-grpc against
# the same pairs sent as SQL by a libpq client (the grpc section of
# `make bench`; bench/run.sh calls it, or run it alone).
#
# Starts a throwaway PostgreSQL server (durable: fsync and synchronous_commit
# on) with the extension and one cell, and claims-grpc in front of it over
# mutual TLS (certificates from test/grpc/make_certs.sh). One program,
# bench/grpc_pairs.cc (C++, stubs generated from grpc/proto, libpq), drives
# both sides the same way: a connection per thread, a fresh username per
# pair, begin and commit as two calls (for SQL: claims_begin_update, then
# claims_commit, each its own statement in autocommit, prepared).
# At 1 and 8 threads the two alternate (A B, B A, ...) and the table gives
# pairs/s, p50 and p99 of each and the ratios gRPC / SQL; then both run at
# a fixed 300 pairs/s (8 threads, latency from each pair's scheduled start).
# Each run also reports the CPU time per pair of the client, of claims-grpc
# and of the store's backends (grpc_pairs reads them over the measured
# part), since client, gateway and store share the machine's cores.
#
# As root: runs the servers and clients as the unprivileged user "claims"
# in a copy of what they need under /tmp. claims-grpc must be built
# (grpc/build/claims-grpc, the top-level `make`) or installed.
#
# Environment: BENCH_QUICK=1 (short runs), BENCH_GRPC_SECONDS [10 | 3],
# BENCH_GRPC_ROUNDS [2 | 1], BENCH_GRPC_THREADS ["1 8"], BENCH_GRPC_RATE
# [300], BENCH_GRPC_RATE_SECONDS [20 | 5], BENCH_GRPC_POOL [8],
# BENCH_KEEP=1, PG_CONFIG, CLAIMS_OS_USER, CLAIMS_GRPC (the binary).
set -u -o pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$BENCH_DIR/.." && pwd)"
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
BINDIR="$("$PG_CONFIG" --bindir)" || { echo "grpc.sh: cannot run $PG_CONFIG" >&2; exit 1; }
RUN_USER="${CLAIMS_OS_USER:-claims}"
QUICK="${BENCH_QUICK:-0}"
if [ "$QUICK" = 1 ]; then D_SECS=3 D_ROUNDS=1 D_RATE_SECS=5; else D_SECS=10 D_ROUNDS=2 D_RATE_SECS=20; fi
SECS="${BENCH_GRPC_SECONDS:-$D_SECS}"
ROUNDS="${BENCH_GRPC_ROUNDS:-$D_ROUNDS}"
THREADS="${BENCH_GRPC_THREADS:-1 8}"
RATE="${BENCH_GRPC_RATE:-300}"
RATE_SECS="${BENCH_GRPC_RATE_SECONDS:-$D_RATE_SECS}"
POOL="${BENCH_GRPC_POOL:-8}"
KEEP="${BENCH_KEEP:-0}"
STARTED=$(date +%s)

progress() {
    local t=$(($(date +%s) - STARTED))
    printf '[grpc %02d:%02d] %s\n' $((t / 60)) $((t % 60)) "$*" >&2
}

die() {
    echo "grpc.sh: $*" >&2
    exit 1
}

# The claims-grpc binary: CLAIMS_GRPC, the tree's build, or the installed one.
find_gateway() {
    local c
    for c in "${CLAIMS_GRPC:-}" "$REPO/grpc/build/claims-grpc" "$(command -v claims-grpc 2>/dev/null)"; do
        [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
    done
    return 1
}

# Root: copy what the run needs to a directory of the unprivileged user
# and run this script there as that user.
main_root() {
    local work gw
    "$REPO/scripts/deps.sh" || die "dependencies are missing"
    gw="$(find_gateway)" || die "claims-grpc is not built (run make grpc first)"
    work="$(mktemp -d /tmp/claims-grpc-bench.XXXXXX)" || die "mktemp failed"
    mkdir -p "$work/src/bench" "$work/src/test/grpc" "$work/src/grpc/build" "$work/src/scripts"
    cp "$BENCH_DIR/grpc.sh" "$BENCH_DIR/grpc_pairs.cc" "$work/src/bench/"
    cp "$REPO/test/grpc/make_certs.sh" "$work/src/test/grpc/"
    cp "$REPO/scripts/deps.sh" "$work/src/scripts/"
    cp -r "$REPO/grpc/proto" "$work/src/grpc/"
    cp "$gw" "$work/src/grpc/build/claims-grpc"
    chown -R "$RUN_USER:" "$work"
    runuser -u "$RUN_USER" -- env PG_CONFIG="$PG_CONFIG" BENCH_QUICK="$QUICK" BENCH_GRPC_SECONDS="$SECS" \
        BENCH_GRPC_ROUNDS="$ROUNDS" BENCH_GRPC_THREADS="$THREADS" BENCH_GRPC_RATE="$RATE" \
        BENCH_GRPC_RATE_SECONDS="$RATE_SECS" BENCH_GRPC_POOL="$POOL" BENCH_KEEP="$KEEP" \
        BENCH_GRPC_WORK="$work" bash "$work/src/bench/grpc.sh"
    local rc=$?
    [ "$KEEP" = 1 ] || rm -rf "$work"
    exit "$rc"
}

WORK=""
GW_PID=""

cleanup() {
    if [ -n "$GW_PID" ]; then
        kill -TERM "$GW_PID" 2>/dev/null
        wait "$GW_PID" 2>/dev/null
    fi
    if [ -n "$WORK" ] && [ -f "$WORK/data/postmaster.pid" ]; then
        "$BINDIR/pg_ctl" -D "$WORK/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
            "$BINDIR/pg_ctl" -D "$WORK/data" -m immediate -w stop >/dev/null 2>&1
    fi
    if [ -z "${BENCH_GRPC_WORK:-}" ] && [ "$KEEP" != 1 ] && [ -n "$WORK" ]; then
        rm -rf "$WORK"
    fi
}

# grpc_pairs from bench/grpc_pairs.cc and stubs generated from grpc/proto.
build_client() {
    local gen="$WORK/gen" f objs=() protos
    progress "building grpc_pairs (stubs from grpc/proto)"
    mkdir -p "$gen"
    protos="$(cd "$REPO/grpc" && find proto -name '*.proto' | sort)"
    # shellcheck disable=SC2086  # one word per file
    (cd "$REPO/grpc" && protoc -I . --cpp_out="$gen" --grpc_out="$gen" \
        --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" $protos) || die "protoc failed"
    for f in $(cd "$gen" && find . -name '*.cc'); do
        objs+=("$gen/${f%.cc}.o")
        # shellcheck disable=SC2046  # pkg-config's words
        g++ -O2 -std=c++17 -I"$gen" $(pkg-config --cflags protobuf grpc++) -c "$gen/$f" -o "$gen/${f%.cc}.o" &
    done
    wait || true
    # shellcheck disable=SC2046  # pkg-config's words
    g++ -O2 -std=c++17 -pthread -I"$gen" -I"$(pkg-config --variable=includedir libpq)" \
        "$BENCH_DIR/grpc_pairs.cc" "${objs[@]}" -o "$WORK/grpc_pairs" \
        $(pkg-config --cflags --libs grpc++ protobuf libpq) >"$WORK/build.log" 2>&1 ||
        { cat "$WORK/build.log"; die "building grpc_pairs failed"; }
}

start_store() {
    PORT=$((44000 + $$ % 1000))
    SOCK="$WORK/sock"
    mkdir -p "$SOCK"
    progress "initdb and start the store"
    "$BINDIR/initdb" -D "$WORK/data" -A trust -E UTF8 --locale=C >"$WORK/initdb.log" 2>&1 ||
        { cat "$WORK/initdb.log"; die "initdb failed"; }
    cat >>"$WORK/data/postgresql.conf" <<EOF

# claims-grpc benchmark
shared_preload_libraries = 'claims'
listen_addresses = ''
unix_socket_directories = '$SOCK'
port = $PORT
max_connections = 60
shared_buffers = 256MB
fsync = on
synchronous_commit = on
max_wal_size = 4GB
checkpoint_timeout = 30min
EOF
    "$BINDIR/pg_ctl" -D "$WORK/data" -l "$WORK/server.log" -w -t 120 start >/dev/null ||
        { tail -n 30 "$WORK/server.log"; die "the store did not start"; }
    "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -d postgres <<'EOF' >/dev/null || die "store setup failed"
SET client_min_messages = warning;
CREATE DATABASE bench;
\c bench
CREATE EXTENSION claims;
CREATE ROLE cell_one LOGIN;
CREATE ROLE claims_gateway LOGIN NOINHERIT;
GRANT cell_one TO claims_gateway;
SELECT claims_register_cell(1, 'cell-one', 'cell_one');
EOF
}

start_gateway() {
    local gw i
    gw="$REPO/grpc/build/claims-grpc"
    [ -x "$gw" ] || gw="$(find_gateway)" || die "claims-grpc is not built (run make grpc first)"
    bash "$REPO/test/grpc/make_certs.sh" "$WORK/certs" || die "certificates failed"
    printf '# CN  role\ncell-one  cell_one\n' >"$WORK/identity.map"
    GW_PORT=$((45000 + $$ % 1000))
    progress "starting claims-grpc on 127.0.0.1:$GW_PORT (pool $POOL)"
    "$gw" --listen "127.0.0.1:$GW_PORT" \
        --conninfo "host=$SOCK port=$PORT dbname=bench user=claims_gateway" \
        --tls-cert "$WORK/certs/server.crt" --tls-key "$WORK/certs/server.key" \
        --client-ca "$WORK/certs/ca.crt" --identity-map "$WORK/identity.map" \
        --pool-size "$POOL" >"$WORK/claims-grpc.log" 2>&1 &
    GW_PID=$!
    for i in $(seq 1 60); do
        if "$WORK/grpc_pairs" --mode grpc --target "127.0.0.1:$GW_PORT" --certs "$WORK/certs" \
            --threads 1 --seconds 0.2 --warmup 0 --prefix "ready$i" 2>/dev/null | grep -q 'errors=0'; then
            return 0
        fi
        kill -0 "$GW_PID" 2>/dev/null || { cat "$WORK/claims-grpc.log"; die "claims-grpc exited"; }
        sleep 0.5
    done
    cat "$WORK/claims-grpc.log"
    die "claims-grpc did not answer within 30 s"
}

# run MODE THREADS SECONDS TAG [extra options]: one grpc_pairs run; its
# output line goes to $WORK/runs/TAG.
run() {
    local mode="$1" threads="$2" secs="$3" tag="$4"
    shift 4
    local pm
    mkdir -p "$WORK/runs"
    pm="$(head -n 1 "$WORK/data/postmaster.pid")"
    if [ "$mode" = grpc ]; then
        "$WORK/grpc_pairs" --mode grpc --target "127.0.0.1:$GW_PORT" --certs "$WORK/certs" \
            --threads "$threads" --seconds "$secs" --prefix "$tag" \
            --gateway-pid "$GW_PID" --store-pid "$pm" "$@" >"$WORK/runs/$tag" 2>&1
    else
        "$WORK/grpc_pairs" --mode sql --conninfo "host=$SOCK port=$PORT dbname=bench user=cell_one" \
            --threads "$threads" --seconds "$secs" --prefix "$tag" \
            --gateway-pid "$GW_PID" --store-pid "$pm" "$@" >"$WORK/runs/$tag" 2>&1
    fi
    progress "$tag: $(cat "$WORK/runs/$tag")"
    "$BINDIR/psql" -X -q -h "$SOCK" -p "$PORT" -d bench -c CHECKPOINT >/dev/null 2>&1
}

# field NAME FILE...: the mean of NAME=value over the runs' lines.
field() {
    local name="$1"
    shift
    cat "$@" | tr ' ' '\n' | awk -F= -v k="$name" '$1 == k { s += $2; n++ } END { if (n) printf "%.2f", s / n; else print "-" }'
}

# cpu_sum FILE...: the mean over the runs of client + gateway + store CPU per pair.
cpu_sum() {
    awk -v c="$(field client_cpu_us "$@")" -v g="$(field gateway_cpu_us "$@")" -v s="$(field store_cpu_us "$@")" \
        'BEGIN { if (c == "-" || g == "-" || s == "-") print "-"; else printf "%.0f", c + g + s }'
}

errors() {
    cat "$@" | tr ' ' '\n' | awk -F= '$1 == "errors" { s += $2 } END { print s + 0 }'
}

ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'
}

main_user() {
    local t r mode order tag g s errs=0 rate8="" p99g p99s
    if [ -n "${BENCH_GRPC_WORK:-}" ]; then
        WORK="$BENCH_GRPC_WORK"
    else
        WORK="$(mktemp -d /tmp/claims-grpc-bench.XXXXXX)" || die "mktemp failed"
    fi
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    build_client
    start_store
    start_gateway
    for t in $THREADS; do
        for r in $(seq 1 "$ROUNDS"); do
            if [ $((r % 2)) = 1 ]; then order="grpc sql"; else order="sql grpc"; fi
            for mode in $order; do
                run "$mode" "$t" "$SECS" "${mode}_t${t}_r$r"
            done
        done
    done
    run grpc 8 "$RATE_SECS" "grpc_rate" --rate "$RATE"
    run sql 8 "$RATE_SECS" "sql_rate" --rate "$RATE"
    errs=$(errors "$WORK"/runs/*)

    echo
    echo "claims-grpc against SQL: BeginUpdate + CommitUpdate pairs (durable store, fsync and"
    echo "synchronous_commit on; ${SECS}s runs, $ROUNDS alternating round(s) each; pool $POOL)"
    echo
    echo "CPU us/pair: CPU time (user + system) per pair of the client (grpc_pairs), of"
    echo "claims-grpc and of the store's backends, and their sum (2 cores: at most"
    echo "2000000 / sum pairs/s if nothing else ran)"
    echo
    printf '%-8s %-6s %10s %9s %9s %8s %8s %8s %8s\n' threads client pairs/s "p50 ms" "p99 ms" \
        "cpu:cli" "gateway" "store" "sum"
    for t in $THREADS; do
        for mode in grpc sql; do
            printf '%-8s %-6s %10s %9s %9s %8s %8s %8s %8s\n' "$t" "$mode" \
                "$(field pairs_per_s "$WORK/runs/${mode}_t${t}"_r*)" \
                "$(field p50_ms "$WORK/runs/${mode}_t${t}"_r*)" "$(field p99_ms "$WORK/runs/${mode}_t${t}"_r*)" \
                "$(field client_cpu_us "$WORK/runs/${mode}_t${t}"_r*)" \
                "$(field gateway_cpu_us "$WORK/runs/${mode}_t${t}"_r*)" \
                "$(field store_cpu_us "$WORK/runs/${mode}_t${t}"_r*)" \
                "$(cpu_sum "$WORK/runs/${mode}_t${t}"_r*)"
        done
        g="$(field pairs_per_s "$WORK"/runs/grpc_t"${t}"_r*)"
        s="$(field pairs_per_s "$WORK"/runs/sql_t"${t}"_r*)"
        printf '%-8s %-6s %10s %9s %9s\n' "$t" "ratio" "$(ratio "$g" "$s")" \
            "$(ratio "$(field p50_ms "$WORK"/runs/grpc_t"${t}"_r*)" "$(field p50_ms "$WORK"/runs/sql_t"${t}"_r*)")" \
            "$(ratio "$(field p99_ms "$WORK"/runs/grpc_t"${t}"_r*)" "$(field p99_ms "$WORK"/runs/sql_t"${t}"_r*)")"
        [ "$t" = 8 ] && rate8="$(ratio "$g" "$s")"
    done
    p99g="$(field p99_ms "$WORK/runs/grpc_rate")"
    p99s="$(field p99_ms "$WORK/runs/sql_rate")"
    echo
    echo "fixed rate $RATE pairs/s, 8 threads, ${RATE_SECS}s (latency from each pair's scheduled start):"
    printf '%-8s %-6s %10s %9s %9s\n' 8 grpc "$(field pairs_per_s "$WORK/runs/grpc_rate")" \
        "$(field p50_ms "$WORK/runs/grpc_rate")" "$p99g"
    printf '%-8s %-6s %10s %9s %9s\n' 8 sql "$(field pairs_per_s "$WORK/runs/sql_rate")" \
        "$(field p50_ms "$WORK/runs/sql_rate")" "$p99s"
    printf '%-8s %-6s %10s %9s %9s\n' 8 ratio "" \
        "$(ratio "$(field p50_ms "$WORK/runs/grpc_rate")" "$(field p50_ms "$WORK/runs/sql_rate")")" \
        "$(ratio "$p99g" "$p99s")"
    echo
    echo "targets:"
    if [ -n "$rate8" ] && [ "$rate8" != - ]; then
        awk -v r="$rate8" 'BEGIN { printf "  8 threads: gRPC pairs/s at least 0.8 of SQL: %.2f, %s\n", r, (r >= 0.8 ? "met" : "MISSED") }'
    fi
    awk -v p="$p99g" -v rate="$RATE" 'BEGIN { if (p == "-") print "  p99 at " rate "/s: no result"; else printf "  gRPC p99 under 10 ms at %d pairs/s: %.2f ms, %s\n", rate, p, (p < 10 ? "met" : "MISSED") }'
    echo "  failed pairs over all runs: $errs"
    if [ "$errs" -gt 0 ]; then
        grep -h -o 'first_error=.*' "$WORK"/runs/* | sort | uniq -c | head -n 5
        return 1
    fi
    return 0
}

if [ "$(id -u)" -eq 0 ]; then
    main_root
else
    main_user
fi
