#!/usr/bin/env bash
# build.sh: build from this tree what `make run`, `make test` and `make
# bench` need, for the server of PG_CONFIG (default PostgreSQL 15's, the
# project's own choice, whatever pg_config a plain `make` would find): both
# extensions, built and installed when run as root, and claims-grpc
# (`make grpc`, grpc/build/). Output goes to the file LOG (default: thrown
# away); its last lines are printed when a step fails.
#
# Usage: build.sh [LOG]
set -u

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
LOG="${1:-}"
OWN_LOG=0
if [ -z "$LOG" ]; then
    LOG="$(mktemp)" || exit 1
    OWN_LOG=1
fi

# Run one make step, appending to LOG; on failure say which and show its end.
step() {
    if ! make -C "$REPO" "$@" >>"$LOG" 2>&1; then
        echo "build.sh: make $* failed:" >&2
        tail -n 60 "$LOG" >&2
        return 1
    fi
}

rc=0
if [ "$(id -u)" -eq 0 ]; then
    step PG_CONFIG="$PG_CONFIG" && step PG_CONFIG="$PG_CONFIG" install || rc=1
fi
[ "$rc" -eq 0 ] && { step PG_CONFIG="$PG_CONFIG" grpc || rc=1; }
[ "$OWN_LOG" -eq 1 ] && rm -f "$LOG"
exit "$rc"
