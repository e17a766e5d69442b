#!/usr/bin/env bash
# scripts/test_package.sh MAJOR DEB: the package install test. Installs the
# package DEB (postgresql-MAJOR-claims, from `make deb`) with apt on a fresh
# copy of a pristine Debian root (Debian 12 for 15, 13 for 17; made once
# with debootstrap under build/ and kept), so that apt pulls PostgreSQL
# MAJOR from the archive as the package's Depends say; then, as an
# unprivileged user, starts a server preloading both libraries and checks
# that both extensions are there and work: CREATE EXTENSION claims and
# claims_cell, a lease through the store's API, and a cell configured
# against that store whose INSERT is claimed there. Then, in the same root,
# a plain `make && make install` of the tree with PostgreSQL's development
# package and no gRPC toolchain (pgxs_build; CLAIMS_PGXS_BUILD_TEST=0 skips
# it). Prints TAP lines and ends with "N passed, N failed"; exit status
# non-zero on a failure. Root.
set -u

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MAJOR="${1:?usage: test_package.sh MAJOR DEB}"
DEB="${2:?usage: test_package.sh MAJOR DEB}"
case "$MAJOR" in
    15) SUITE=bookworm ;;
    17) SUITE=trixie ;;
    *) echo "test_package.sh: no Debian release known for PostgreSQL $MAJOR"; echo "0 passed, 1 failed"; exit 1 ;;
esac
BUILD="${CLAIMS_BUILD_DIR:-$REPO/build}"
PRISTINE="$BUILD/pristine-$SUITE"
ROOT="$BUILD/pkgtest-$MAJOR"
N=0
PASSED=0
FAILED=0

# shellcheck source=scripts/root_lib.sh
. "$REPO/scripts/root_lib.sh"

ok() {
    N=$((N + 1))
    if [ "$1" = 0 ]; then
        echo "ok $N - $2"
        PASSED=$((PASSED + 1))
    else
        echo "not ok $N - $2"
        FAILED=$((FAILED + 1))
    fi
}

finish() {
    unmount_all
    [ "${CLAIMS_KEEP_ROOT:-0}" = 1 ] || rm -rf --one-file-system "$ROOT" 2>/dev/null
    echo "1..$N"
    echo "$PASSED passed, $FAILED failed"
    [ "$FAILED" -eq 0 ]
    exit
}

# Run a command in the root, as root.
in_root() {
    chroot "$ROOT" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

# Run SQL in a database of the root's server as its superuser; prints the result.
sql() {
    in_root runuser -u pkgtest -- /usr/lib/postgresql/"$MAJOR"/bin/psql -X -q -A -t -v ON_ERROR_STOP=1 \
        -h /tmp/pkgtest -p 5499 -d "$1" -c "$2"
}

# The PGXS habit in the same root: with PostgreSQL's development package
# (and a C compiler) but no gRPC toolchain, a plain `make && make install`
# builds and installs both extensions, `make PG_CONFIG=...` picks the server,
# and `make clean` works. As the unprivileged user, on a copy of the tree.
pgxs_build() {
    local log="$BUILD/pkgtest-$MAJOR-pgxs.log" src=/home/pkgtest/claims-src p f rc
    in_root apt-get install -y --no-install-recommends "postgresql-server-dev-$MAJOR" gcc make >"$log" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || tail -n 20 "$log"
    ok $rc "apt installs postgresql-server-dev-$MAJOR, gcc and make"
    [ "$rc" -eq 0 ] || return
    rc=0
    for p in pkg-config libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc; do
        [ "$(in_root dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] && {
            echo "# $p is installed"
            rc=1
        }
    done
    ok $rc "the root has no gRPC toolchain (pkg-config, gRPC and protobuf development packages)"
    mkdir -p "$ROOT$src" &&
        tar -C "$REPO" --anchored --exclude=./.git --exclude=./build --exclude=./grpc/build \
            --exclude='./tmp_check*' --exclude='./cell/tmp_check*' --exclude=./.run \
            --exclude='*.o' --exclude='*.so' --exclude='*.bc' -cf - . | tar -C "$ROOT$src" -xf - &&
        in_root chown -R pkgtest: "$src"
    ok $? "a copy of the tree in the root"
    in_root runuser -u pkgtest -- make -C "$src" >>"$log" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || tail -n 30 "$log"
    ok $rc "make builds both extensions with the pg_config on PATH"
    in_root runuser -u pkgtest -- make -C "$src" install DESTDIR=/home/pkgtest/stage >>"$log" 2>&1
    ok $? "make install (DESTDIR) installs them"
    for f in "/usr/lib/postgresql/$MAJOR/lib/claims.so" "/usr/lib/postgresql/$MAJOR/lib/claims_cell.so" \
        "/usr/share/postgresql/$MAJOR/extension/claims.control" \
        "/usr/share/postgresql/$MAJOR/extension/claims_cell.control"; do
        [ -f "$ROOT/home/pkgtest/stage$f" ]
        ok $? "make install puts $f in place"
    done
    in_root runuser -u pkgtest -- make -C "$src" clean >>"$log" 2>&1 && [ ! -e "$ROOT$src/claims.so" ]
    ok $? "make clean works without the gRPC toolchain"
    in_root runuser -u pkgtest -- make -C "$src" PG_CONFIG="/usr/lib/postgresql/$MAJOR/bin/pg_config" >>"$log" 2>&1 &&
        [ -f "$ROOT$src/claims.so" ] && [ -f "$ROOT$src/cell/claims_cell.so" ]
    ok $? "make PG_CONFIG=/usr/lib/postgresql/$MAJOR/bin/pg_config builds both"
}

trap 'unmount_all' EXIT
[ "$(id -u)" -eq 0 ] || { echo "test_package.sh: must run as root"; ok 1 "run as root"; finish; }
[ -f "$DEB" ] || { ok 1 "the package $DEB exists"; finish; }

debootstrap_root "$SUITE" "$PRISTINE"
ok $? "a pristine Debian $SUITE root"
[ "$FAILED" -eq 0 ] || finish
copy_root "$PRISTINE" "$ROOT" && configure_root "$ROOT" && mount_system "$ROOT"
ok $? "a fresh copy of it, configured and mounted"
[ "$FAILED" -eq 0 ] || finish

cp "$DEB" "$ROOT/tmp/" || true
log="$BUILD/pkgtest-$MAJOR-apt.log"
{ in_root apt-get update && in_root apt-get install -y --no-install-recommends "/tmp/$(basename "$DEB")"; } >"$log" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { tail -n 20 "$log"; echo "# apt failed: see $log (is the Debian archive reachable?)"; }
ok $rc "apt installs $(basename "$DEB") and the PostgreSQL $MAJOR it depends on"
[ "$FAILED" -eq 0 ] || finish

files="$(in_root dpkg -L "postgresql-$MAJOR-claims")"
for f in "/usr/share/postgresql/$MAJOR/extension/claims.control" \
    "/usr/share/postgresql/$MAJOR/extension/claims_cell.control" \
    "/usr/lib/postgresql/$MAJOR/lib/claims.so" "/usr/lib/postgresql/$MAJOR/lib/claims_cell.so" \
    "/usr/share/doc/postgresql-$MAJOR-claims/README.md" \
    "/usr/share/doc/postgresql-$MAJOR-claims/docs/store-api.md" \
    "/usr/share/doc/postgresql-$MAJOR-claims/docs/cell.md"; do
    grep -qx "$f" <<<"$files"
    ok $? "the package installs $f"
done

in_root useradd --create-home pkgtest 2>/dev/null
in_root mkdir -p /tmp/pkgtest && in_root chown pkgtest /tmp/pkgtest &&
    in_root runuser -u pkgtest -- /usr/lib/postgresql/"$MAJOR"/bin/initdb -D /home/pkgtest/data -A trust >/dev/null &&
    printf "shared_preload_libraries = 'claims,claims_cell'\nlisten_addresses = ''\nunix_socket_directories = '/tmp/pkgtest'\nport = 5499\n" \
        >>"$ROOT/home/pkgtest/data/postgresql.conf" &&
    in_root runuser -u pkgtest -- /usr/lib/postgresql/"$MAJOR"/bin/pg_ctl -D /home/pkgtest/data \
        -l /home/pkgtest/server.log -w start >/dev/null
ok $? "a PostgreSQL $MAJOR server preloading claims and claims_cell starts"
if [ "$FAILED" -eq 0 ]; then
    out="$(sql postgres "CREATE EXTENSION claims; SELECT extversion FROM pg_extension WHERE extname = 'claims'")"
    [ "$out" = "$("$REPO/scripts/dist_version.sh" claims | sed 's/\.0$//')" ]
    ok $? "CREATE EXTENSION claims installs the control file's version ($out)"
    out="$(sql postgres "CREATE ROLE cell_one LOGIN; SELECT claims_register_cell(1, 'cell-one', 'cell_one');
        SET ROLE cell_one;
        SELECT claims_commit(1, (claims_begin_update('{\"cell_id\": 1, \"create_records\": [{\"bucket\": {\"type\": \"USERNAMES\", \"value\": \"alice\"}, \"subject\": {\"type\": \"USER\", \"id\": 1}, \"source\": {\"type\": \"RAILS_TABLE_USERS\", \"rails_primary_key_id\": 1}}]}') ->> 'lease_uuid')::uuid);
        RESET ROLE;
        SELECT status FROM claims WHERE bucket_value = 'alice'" | tail -n 1)"
    [ "$out" = ACTIVE ]
    ok $? "the store's API: a lease taken and committed ($out)"
    out="$(sql postgres "CREATE DATABASE cell1" && sql cell1 "CREATE EXTENSION claims_cell;
        CREATE SERVER topology FOREIGN DATA WRAPPER claims_cell_store OPTIONS (host '/tmp/pkgtest', port '5499', dbname 'postgres');
        CREATE USER MAPPING FOR PUBLIC SERVER topology OPTIONS (user 'cell_one', password_required 'false');
        SELECT claims_cell.configure('topology', 1);
        SELECT extversion FROM pg_extension WHERE extname = 'claims_cell'" | tail -n 1)"
    [ "$out" = "$("$REPO/scripts/dist_version.sh" claims_cell | sed 's/\.0$//')" ]
    ok $? "CREATE EXTENSION claims_cell and configure() ($out)"
    out="$(sql cell1 "CREATE TABLE users (id bigint PRIMARY KEY, username text);
        SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
        INSERT INTO users VALUES (2, 'bob')" >/dev/null && sql postgres "SELECT creator_id || ' ' || status FROM claims WHERE bucket_value = 'bob'")"
    [ "$out" = "1 ACTIVE" ]
    ok $? "a claimed INSERT at the cell is claimed at the store ($out)"
    in_root runuser -u pkgtest -- /usr/lib/postgresql/"$MAJOR"/bin/pg_ctl -D /home/pkgtest/data -m fast stop >/dev/null
    ok $? "the server stops"
else
    tail -n 20 "$ROOT/home/pkgtest/server.log" 2>/dev/null
fi
[ "${CLAIMS_PGXS_BUILD_TEST:-1}" = 0 ] || pgxs_build
finish
