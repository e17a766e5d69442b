#!/usr/bin/env bash
# stop.sh: stop the local server started by scripts/run.sh (`make stop`),
# and claims-grpc in front of it. Does nothing when they are not running.
# The data in .run/data is kept.
set -u

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
DATA="$REPO/.run/data"

# Run a command as the owner of the data directory (pg_ctl refuses root).
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u "$OWNER" -- "$@"
    else
        "$@"
    fi
}

# Stop claims-grpc (.run/grpc/claims-grpc.pid): SIGTERM, at most 30 s.
stop_grpc() {
    local pidfile="$REPO/.run/grpc/claims-grpc.pid" pid
    [ -f "$pidfile" ] || return 0
    pid="$(cat "$pidfile")"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        echo "stop.sh: stopping claims-grpc (pid $pid)"
        kill -TERM "$pid"
        for _ in $(seq 1 300); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "stop.sh: claims-grpc (pid $pid) did not stop within 30 s" >&2
            return 1
        fi
    fi
    rm -f "$pidfile"
}

main() {
    local bindir
    stop_grpc || exit 1
    if [ ! -f "$DATA/PG_VERSION" ]; then
        echo "stop.sh: no server data in $DATA; nothing to stop"
        exit 0
    fi
    bindir="$("$PG_CONFIG" --bindir)" || {
        echo "stop.sh: cannot run $PG_CONFIG" >&2
        exit 1
    }
    OWNER="$(stat -c %U "$DATA")"
    cd "$REPO" || exit 1
    if ! as_owner "$bindir/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
        echo "stop.sh: the server is not running"
        exit 0
    fi
    if as_owner "$bindir/pg_ctl" -D "$DATA" -m fast -w -t 60 stop; then
        rm -f "$REPO/.run/library.sha256"
        exit 0
    fi
    echo "stop.sh: pg_ctl stop failed; see $REPO/.run/server.log" >&2
    exit 1
}

main "$@"
