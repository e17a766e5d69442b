#!/usr/bin/env bash
# run.sh: build and install the claims and claims_cell extensions, start a
# local PostgreSQL 15 server with both preloaded, and run the demo (`make run`).
#
# As root on a fresh Debian 12 machine: installs the packages (scripts/deps.sh),
# builds and installs the extension, and runs the server as the unprivileged
# "claims" OS user. As another user: uses the installed extension and runs
# the server as that user.
#
# The server keeps its data in .run/data and its log in .run/server.log,
# listens on 127.0.0.1 and on a socket in .run/, port 5499, and has a
# database "claims" with the extension created (the store) and two cell
# databases, cell_1 and cell_2, with claims_cell claiming the username and
# email of their users tables there (scripts/cell_setup.sql); the demo ends
# with the two cells racing for a username and a verify() that repairs a
# row written with the triggers off (scripts/cell_demo.sql). Running this again reuses
# the running server (restarting it only when the installed library or the
# settings changed). `make stop` stops it.
#
# claims-grpc (grpc/build/claims-grpc, or the installed one) is then
# started in front of the store on 127.0.0.1:5500 with throwaway
# certificates and an identity map in .run/grpc/ (CN cell-one -> cell_1,
# cell-two -> cell_2, claims-admin -> claims_demo_admin; it logs in as the
# NOINHERIT role claims_grpc), and scripts/grpc_demo.py shows a
# BeginUpdate / CommitUpdate and a conflict through it.
#
# Environment: PG_CONFIG (default /usr/lib/postgresql/15/bin/pg_config),
# CLAIMS_OS_USER (default claims), CLAIMS_PORT (default 5499),
# CLAIMS_GRPC_PORT (default 5500), CLAIMS_GRPC (the claims-grpc binary).
set -u

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
PORT="${CLAIMS_PORT:-5499}"
GRPC_PORT="${CLAIMS_GRPC_PORT:-5500}"
RUN_DIR="$REPO/.run"
DATA="$RUN_DIR/data"
LOG="$RUN_DIR/server.log"
DBNAME=claims
if [ "$(id -u)" -eq 0 ]; then
    RUN_USER="${CLAIMS_OS_USER:-claims}"
else
    RUN_USER="$(id -un)"
fi

# Print an error and exit.
die() {
    echo "run.sh: $*" >&2
    exit 1
}

# Run a command as the server's OS user.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u "$RUN_USER" -- "$@"
    else
        "$@"
    fi
}

# Build and install the extensions and build claims-grpc (root,
# scripts/build.sh), or check that the extensions are installed.
build_and_install() {
    if [ "$(id -u)" -eq 0 ]; then
        echo "run.sh: building and installing the extensions, building claims-grpc"
        PG_CONFIG="$PG_CONFIG" "$REPO/scripts/build.sh" || die "the build failed"
    elif [ ! -f "$SHAREDIR/extension/claims.control" ] || [ ! -f "$PKGLIBDIR/claims.so" ] ||
        [ ! -f "$SHAREDIR/extension/claims_cell.control" ] || [ ! -f "$PKGLIBDIR/claims_cell.so" ]; then
        die "the claims and claims_cell extensions are not installed; run 'make install' as root first"
    else
        PG_CONFIG="$PG_CONFIG" "$REPO/scripts/build.sh" || echo "run.sh: claims-grpc could not be built; no gRPC demo"
    fi
}

# Give the server's user search (o+x) access to every directory above the
# repository that it cannot traverse yet, so it can reach .run/data.
ensure_traversable() {
    local dir="$REPO"
    [ "$(id -u)" -eq 0 ] || return 0
    while [ -n "$dir" ] && [ "$dir" != "/" ]; do
        if ! runuser -u "$RUN_USER" -- test -x "$dir"; then
            echo "run.sh: chmod o+x $dir (so $RUN_USER can reach .run/)"
            chmod o+x "$dir" || die "cannot chmod o+x $dir"
        fi
        dir="$(dirname "$dir")"
    done
    local script
    for script in demo.sql demo_expect.sql demo_assert.sql cell_setup.sql cell_demo.sql \
        cell_demo_peer.sql grpc_demo.py; do
        if ! runuser -u "$RUN_USER" -- test -r "$REPO/scripts/$script"; then
            chmod o+r "$REPO/scripts/$script" || die "cannot make scripts/$script readable for $RUN_USER"
        fi
    done
}

# Create .run/ (owned by the server's user) and choose the socket directory:
# .run/ itself, or a directory under /tmp when the path is too long for a
# Unix socket name.
prepare_run_dir() {
    mkdir -p "$RUN_DIR" || die "cannot create $RUN_DIR"
    if [ "$(id -u)" -eq 0 ]; then
        chown "$RUN_USER:" "$RUN_DIR" || die "cannot chown $RUN_DIR"
    fi
    chmod 755 "$RUN_DIR"
    SOCK_DIR="$RUN_DIR"
    if [ $((${#SOCK_DIR} + 20)) -gt 100 ]; then
        SOCK_DIR="/tmp/claims-run-$RUN_USER-$PORT"
        mkdir -p "$SOCK_DIR" || die "cannot create $SOCK_DIR"
        [ "$(id -u)" -eq 0 ] && chown "$RUN_USER:" "$SOCK_DIR"
        chmod 755 "$SOCK_DIR"
    fi
    ensure_traversable
}

# initdb .run/data unless it already holds a cluster.
init_data() {
    if [ -f "$DATA/PG_VERSION" ]; then
        return 0
    fi
    echo "run.sh: initializing $DATA"
    as_owner "$BINDIR/initdb" -D "$DATA" -U "$RUN_USER" -A trust -E UTF8 --locale=C.UTF-8 \
        >"$RUN_DIR/initdb.log" 2>&1 || {
        tail -n 30 "$RUN_DIR/initdb.log"
        die "initdb failed"
    }
    if [ "$(id -u)" -eq 0 ]; then
        chown "$RUN_USER:" "$RUN_DIR/initdb.log"
    fi
}

# Write the server settings to .run/data/claims_run.conf (included from
# postgresql.conf). Sets CONF_CHANGED=1 when the file changed.
write_conf() {
    local conf="$DATA/claims_run.conf" new
    new="$(
        echo "# Written by scripts/run.sh; changes here are overwritten."
        echo "port = $PORT"
        echo "listen_addresses = '127.0.0.1'"
        echo "unix_socket_directories = '$SOCK_DIR'"
        echo "shared_preload_libraries = 'claims,claims_cell'"
        echo "claims.database = '$DBNAME'"
        echo "logging_collector = off"
    )"
    CONF_CHANGED=0
    if [ ! -f "$conf" ] || [ "$(cat "$conf")" != "$new" ]; then
        printf '%s\n' "$new" | as_owner tee "$conf" >/dev/null || die "cannot write $conf"
        CONF_CHANGED=1
    fi
    if ! grep -q "^include_if_exists = 'claims_run.conf'" "$DATA/postgresql.conf"; then
        printf "\ninclude_if_exists = 'claims_run.conf'\n" |
            as_owner tee -a "$DATA/postgresql.conf" >/dev/null || die "cannot edit postgresql.conf"
        CONF_CHANGED=1
    fi
}

# Checksum of the installed library, to notice a rebuilt extension.
library_sum() {
    cat "$PKGLIBDIR/claims.so" "$PKGLIBDIR/claims_cell.so" 2>/dev/null | sha256sum | cut -d' ' -f1
}

# Start the server, or reuse it when it is already running (restarting it
# when its settings or the installed library changed since it started).
start_server() {
    local sum started_sum=""
    sum="$(library_sum)"
    [ -f "$RUN_DIR/library.sha256" ] && started_sum="$(cat "$RUN_DIR/library.sha256")"
    if as_owner "$BINDIR/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
        if [ "$CONF_CHANGED" = 1 ] || [ "$sum" != "$started_sum" ]; then
            echo "run.sh: settings or library changed; restarting the server"
            as_owner "$BINDIR/pg_ctl" -D "$DATA" -l "$LOG" -m fast -w -t 60 restart >/dev/null || {
                tail -n 30 "$LOG"
                die "restart failed; see $LOG"
            }
        else
            echo "run.sh: reusing the running server (port $PORT)"
            return 0
        fi
    else
        echo "run.sh: starting the server on port $PORT (log: $LOG)"
        as_owner touch "$LOG"
        as_owner "$BINDIR/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null || {
            tail -n 30 "$LOG"
            die "the server did not start; see $LOG"
        }
    fi
    echo "$sum" | as_owner tee "$RUN_DIR/library.sha256" >/dev/null
}

# Run psql as the server's user against this server.
psql_run() {
    as_owner "$BINDIR/psql" -X -h "$SOCK_DIR" -p "$PORT" -U "$RUN_USER" "$@"
}

# Create the claims database and the extension in it if missing; a store
# made by an earlier version is updated (claims-grpc needs 1.2's functions).
create_database() {
    local exists
    exists="$(psql_run -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DBNAME'")" ||
        die "cannot connect to the server"
    if [ "$exists" != 1 ]; then
        echo "run.sh: creating database $DBNAME"
        as_owner "$BINDIR/createdb" -h "$SOCK_DIR" -p "$PORT" -U "$RUN_USER" "$DBNAME" ||
            die "createdb failed"
    fi
    psql_run -d "$DBNAME" -q -v ON_ERROR_STOP=1 -c 'SET client_min_messages = warning' \
        -c 'CREATE EXTENSION IF NOT EXISTS claims' -c 'ALTER EXTENSION claims UPDATE' ||
        die "CREATE EXTENSION claims failed"
    # the role the Prometheus exporters log in as: pg_monitor, nothing more
    psql_run -d postgres -q -v ON_ERROR_STOP=1 -c "DO \$\$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'claims_monitor') THEN
            CREATE ROLE claims_monitor LOGIN IN ROLE pg_monitor;
        END IF; END \$\$" || die "creating the role claims_monitor failed"
}

# Run scripts/demo.sql, echoing each query.
run_demo() {
    echo "run.sh: running scripts/demo.sql"
    echo
    psql_run -d "$DBNAME" -f "$REPO/scripts/demo.sql"
}

# Create the cell databases cell_1 and cell_2 (claims_cell, a users table
# whose username and email are claimed at the store) if missing.
create_cells() {
    local i exists
    for i in 1 2; do
        exists="$(psql_run -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'cell_$i'")" ||
            die "cannot connect to the server"
        if [ "$exists" != 1 ]; then
            echo "run.sh: creating cell database cell_$i"
            as_owner "$BINDIR/createdb" -h "$SOCK_DIR" -p "$PORT" -U "$RUN_USER" "cell_$i" ||
                die "createdb cell_$i failed"
        fi
        psql_run -d "cell_$i" -q -v cell_id="$i" -v store_host=127.0.0.1 -v store_port="$PORT" \
            -v store_db="$DBNAME" -f "$REPO/scripts/cell_setup.sql" >/dev/null ||
            die "setting up cell database cell_$i failed"
    done
}

# Run scripts/cell_demo.sql in cell_1; it runs psql against cell_2 itself
# (scripts/cell_demo_peer.sql), writing cell 2's output to .run/.
run_cell_demo() {
    echo
    echo "run.sh: running scripts/cell_demo.sql"
    CELL_2_PSQL="$BINDIR/psql -X -e -h $SOCK_DIR -p $PORT -U $RUN_USER -d cell_2" \
        CLAIMS_DEMO_DIR="$REPO/scripts" CLAIMS_DEMO_PEER_LOG="$RUN_DIR/cell_2_step.log" \
        psql_run -d cell_1 -f "$REPO/scripts/cell_demo.sql"
}

# The claims-grpc binary: CLAIMS_GRPC, the tree's build, or the installed one.
find_grpc() {
    local c
    for c in "${CLAIMS_GRPC:-}" "$REPO/grpc/build/claims-grpc" "$(command -v claims-grpc 2>/dev/null)"; do
        [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
    done
    return 1
}

# Start claims-grpc in front of the store (stopping one left running by an
# earlier run first): certificates, identity map, its login role.
start_grpc() {
    local gw dir="$RUN_DIR/grpc" pid
    gw="$(find_grpc)" || {
        # as root it was just built: its absence is a failure, not a choice
        [ "$(id -u)" -eq 0 ] && die "claims-grpc is not built (make grpc)"
        echo "run.sh: claims-grpc is not built (make grpc); no gRPC demo"
        return 1
    }
    if [ ! -d "$dir" ]; then
        mkdir -p "$dir" || die "cannot create $dir"
        [ "$(id -u)" -eq 0 ] && chown "$RUN_USER:" "$dir"
    fi
    if [ ! -f "$dir/certs/ca.crt" ]; then
        as_owner bash "$REPO/test/grpc/make_certs.sh" "$dir/certs" || die "certificates for claims-grpc failed"
    fi
    printf '%s\n' '# certificate CN    database role' 'cell-one           cell_1' \
        'cell-two           cell_2' 'claims-admin       claims_demo_admin' |
        as_owner tee "$dir/identity.map" >/dev/null || die "cannot write $dir/identity.map"
    psql_run -d "$DBNAME" -q -v ON_ERROR_STOP=1 <<'EOF' >/dev/null || die "cannot create the roles of claims-grpc"
SET client_min_messages = warning;
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'claims_demo_admin') THEN
        CREATE ROLE claims_demo_admin;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'claims_grpc') THEN
        CREATE ROLE claims_grpc LOGIN NOINHERIT;
    END IF;
END $$;
GRANT claims_admin TO claims_demo_admin;
GRANT cell_1, cell_2, claims_demo_admin TO claims_grpc;
EOF
    stop_grpc
    echo "run.sh: starting claims-grpc on 127.0.0.1:$GRPC_PORT (log: $dir/claims-grpc.log)"
    # shellcheck disable=SC2016  # $$ is the shell that execs claims-grpc
    as_owner bash -c 'echo $$ >"$1"; shift; exec "$@"' sh "$dir/claims-grpc.pid" \
        "$gw" --listen "127.0.0.1:$GRPC_PORT" \
        --conninfo "host=$SOCK_DIR port=$PORT dbname=$DBNAME user=claims_grpc" \
        --tls-cert "$dir/certs/server.crt" --tls-key "$dir/certs/server.key" \
        --client-ca "$dir/certs/ca.crt" --identity-map "$dir/identity.map" \
        >>"$dir/claims-grpc.log" 2>&1 </dev/null &
    for _ in $(seq 1 50); do
        [ -s "$dir/claims-grpc.pid" ] && break
        sleep 0.1
    done
    pid="$(cat "$dir/claims-grpc.pid" 2>/dev/null)"
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
        tail -n 20 "$dir/claims-grpc.log"
        die "claims-grpc did not start; see $dir/claims-grpc.log"
    fi
}

# Stop a claims-grpc started by an earlier run (SIGTERM, at most 30 s).
stop_grpc() {
    local pidfile="$RUN_DIR/grpc/claims-grpc.pid" pid
    [ -f "$pidfile" ] || return 0
    pid="$(cat "$pidfile")"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 1 300); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
    fi
    rm -f "$pidfile"
}

# scripts/grpc_demo.py: a BeginUpdate / CommitUpdate and a conflict
# through claims-grpc, with a client generated from grpc/proto (it waits,
# at most 20 s, for the gateway to answer SERVING).
run_grpc_demo() {
    echo
    echo "run.sh: running scripts/grpc_demo.py against claims-grpc"
    echo
    as_owner /usr/bin/python3 "$REPO/scripts/grpc_demo.py" "$REPO" "$RUN_DIR/grpc/certs" \
        "$RUN_DIR/grpc/stubs" "127.0.0.1:$GRPC_PORT"
}

# Tell how to connect and stop.
print_usage() {
    cat <<EOF

The claims server is running (data: $DATA, log: $LOG).
Connect with:
    psql -h 127.0.0.1 -p $PORT -U $RUN_USER $DBNAME
or through the socket:
    psql -h $SOCK_DIR -p $PORT -U $RUN_USER $DBNAME
The cell databases cell_1 and cell_2 claim the username and email of
their users tables at the store:
    psql -h 127.0.0.1 -p $PORT -U $RUN_USER cell_1
Run the demo again with:
    psql -h 127.0.0.1 -p $PORT -U $RUN_USER -f scripts/demo.sql $DBNAME

Prometheus: scrape the store and each cell with prometheus-postgres-exporter
(installed by scripts/deps.sh), one exporter per database, logged in as
claims_monitor (a member of pg_monitor only):
    DATA_SOURCE_NAME='host=127.0.0.1 port=$PORT dbname=$DBNAME user=claims_monitor sslmode=disable' \\
      prometheus-postgres-exporter --web.listen-address=127.0.0.1:9187 \\
      --extend.query-path=$REPO/monitoring/queries-store.yaml &
    DATA_SOURCE_NAME='host=127.0.0.1 port=$PORT dbname=cell_1 user=claims_monitor sslmode=disable' \\
      prometheus-postgres-exporter --web.listen-address=127.0.0.1:9188 \\
      --extend.query-path=$REPO/monitoring/queries-cell.yaml &
    (cell_2 likewise on 127.0.0.1:9189 with dbname=cell_2)
    curl -s http://127.0.0.1:9187/metrics | grep '^claims_'
Then point Prometheus at them: job "claims_store" for 127.0.0.1:9187, job
"claims_cell" for 127.0.0.1:9188 and :9189, with the rule files
$REPO/monitoring/recording.yml and $REPO/monitoring/alerts.yml
(docs/monitoring.md).
EOF
    if [ "${GRPC_STARTED:-0}" = 1 ]; then
        cat <<EOF
claims-grpc serves ClaimService on 127.0.0.1:$GRPC_PORT (mutual TLS; certificates,
identity map and log in $RUN_DIR/grpc/). Run its demo again with:
    /usr/bin/python3 scripts/grpc_demo.py . $RUN_DIR/grpc/certs $RUN_DIR/grpc/stubs 127.0.0.1:$GRPC_PORT
EOF
    fi
    cat <<EOF
Stop it all with:
    make stop
EOF
}

main() {
    local rc
    "$REPO/scripts/deps.sh" || die "dependencies are missing"
    BINDIR="$("$PG_CONFIG" --bindir)" || die "cannot run $PG_CONFIG"
    PKGLIBDIR="$("$PG_CONFIG" --pkglibdir)"
    SHAREDIR="$("$PG_CONFIG" --sharedir)"
    build_and_install
    prepare_run_dir
    cd "$REPO" || die "cannot enter $REPO"
    init_data
    write_conf
    start_server
    create_database
    run_demo
    rc=$?
    if [ "$rc" -eq 0 ]; then
        create_cells
        run_cell_demo
        rc=$?
    fi
    GRPC_STARTED=0
    if [ "$rc" -eq 0 ] && start_grpc; then
        GRPC_STARTED=1
        run_grpc_demo
        rc=$?
    fi
    print_usage
    if [ "$rc" -ne 0 ]; then
        echo "run.sh: the demo stopped with an unexpected error (psql status $rc)" >&2
    fi
    exit "$rc"
}

main "$@"
