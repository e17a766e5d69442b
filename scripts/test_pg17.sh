#!/usr/bin/env bash
# test_pg17.sh: `make test PG=17`. Runs the whole of `make test` (every suite
# of both extensions) against PostgreSQL 17 from a Debian 13 (trixie) root,
# on this Debian 12 machine, whose own PostgreSQL (15) is left alone, then
# the package suite (postgresql-17-claims built in the root and installed on
# a fresh copy of a pristine Debian 13 root). CLAIMS_PG17_RUN=deb (`make deb
# PG=17`) only builds the package into build/deb/; CLAIMS_PG17_RUN=bench
# (`make bench PG=17`) runs bench/run.sh in the root (BENCH_* passed on) and
# keeps a full run's table as bench/RESULTS-pg17.md.
#
# As root:
#   1. the root: build/pg17-root (CLAIMS_PG17_ROOT), made once with
#      debootstrap from the Debian archive this machine already uses, and
#      reused by later runs; the packages of scripts/deps.sh (with 17 for
#      15) are installed inside by deps.sh itself, only those missing;
#   2. the repository is bind-mounted read-only at /mnt/claims, with /proc
#      and /dev; the mounts are removed on exit, whatever happens;
#   3. inside the root the tree is copied (without build output: the
#      objects of a 15 build must not be linked for 17) and scripts/test.sh
#      runs there as root with PG_CONFIG=/usr/lib/postgresql/17/bin/pg_config:
#      it builds and installs with -Werror into the root's PostgreSQL 17 and
#      runs the suites as the unprivileged user "claims" of the root.
#
# The last line printed is test.sh's "N passed, N failed" (one failure when
# the root could not be made or the run did not finish); the exit status is
# non-zero when anything failed. CLAIMS_* variables (CLAIMS_SUITE_TIMEOUT,
# CLAIMS_SEED, CLAIMS_FAULT_ROUNDS, ...) are passed to the run inside.
# CLAIMS_DEBIAN_MIRROR overrides the archive (default: the host's).
set -u

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_MAJOR=17
SUITE=trixie
ROOT="${CLAIMS_PG17_ROOT:-$REPO/build/pg17-root}"
READY="$ROOT/.claims-root-ready"
INNER_PG_CONFIG="/usr/lib/postgresql/$PG_MAJOR/bin/pg_config"
PRISTINE="$(dirname "$ROOT")/pristine-$SUITE"

# Print the failure summary and exit.
fail() {
    echo "test_pg17.sh: $*"
    echo
    echo "0 passed, 1 failed"
    exit 1
}

# shellcheck source=scripts/root_lib.sh
. "$REPO/scripts/root_lib.sh"

# Make the root once from a pristine Debian 13 root, which is kept (and
# used by the package test, scripts/test_package.sh).
make_root() {
    [ -f "$READY" ] && return 0
    debootstrap_root "$SUITE" "$PRISTINE" || return 1
    echo "test_pg17.sh: copying the pristine root to $ROOT"
    copy_root "$PRISTINE" "$ROOT"
}

[ "$(id -u)" -eq 0 ] || fail "must run as root (debootstrap, chroot and mounts)"
mkdir -p "$(dirname "$ROOT")" || fail "cannot create $(dirname "$ROOT")"
# one run per root at a time: the mounts and the root's PostgreSQL are shared
exec 9>"$ROOT.lock" || fail "cannot open $ROOT.lock"
flock -n 9 || { echo "test_pg17.sh: waiting for another run on $ROOT"; flock 9; }
trap unmount_all EXIT
trap 'exit 130' INT TERM

start=$(date +%s)
clear_stale_mounts "$ROOT" || fail "mounts left under $ROOT by an earlier run could not be removed"
make_root || fail "could not make the Debian $SUITE root"
configure_root "$ROOT" || fail "could not configure the root"

mount_system "$ROOT" || fail "could not mount /proc and /dev"
do_mount --bind "$REPO" "$ROOT/mnt/claims" || fail "could not bind the repository"
mount -o remount,bind,ro "$ROOT/mnt/claims" 2>/dev/null || true

# Variables of the run inside: a clean environment, plus CLAIMS_* settings.
inner_env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
    LANG=C.UTF-8 TERM=dumb PG_CONFIG="$INNER_PG_CONFIG" CLAIMS_PG_MAJOR="$PG_MAJOR"
    CLAIMS_PACKAGE_TEST=0 CLAIMS_DEB_OUT=/var/tmp/claims-deb)
# The copy inside has no git history: the benchmark's header is told here.
[ "${CLAIMS_PG17_RUN:-test}" = bench ] && inner_env+=(BENCH_CODE="$("$REPO/bench/run.sh" --code)")
while IFS= read -r var; do
    case "$var" in
        CLAIMS_PG17_ROOT=* | CLAIMS_DEBIAN_MIRROR=* | CLAIMS_PG_MAJOR=* | CLAIMS_TEST_SUMMARY_FILE=* | \
            CLAIMS_PACKAGE_TEST=* | CLAIMS_DEB_OUT=* | CLAIMS_PG17_RUN=*) ;;
        CLAIMS_*=* | BENCH_*=*) inner_env+=("$var") ;;
    esac
done < <(env)

# The copy inside the root: the tree as test.sh's own copy takes it, and no
# build output; then test.sh, or deb.sh (make deb PG=17).
inner_script='
set -u
cmd=$1
src=/var/tmp/claims-src
rm -rf "$src" && mkdir -p "$src" || exit 1
tar -C /mnt/claims --anchored --exclude=./.git --exclude=./build --exclude="./tmp_check*" \
    --exclude="./cell/tmp_check*" --exclude=./results --exclude=./cell/results \
    --exclude=./output_iso --exclude=./log --exclude=./cell/log --exclude=./.run \
    --exclude="*.o" --exclude="*.so" --exclude="*.bc" -cf - . | tar -C "$src" -xf - || exit 1
cd "$src" || exit 1
case "$cmd" in
    bench) exec bash bench/run.sh ;;
    *) exec bash "$src/scripts/$cmd" ;;
esac
'

# Build postgresql-17-claims inside the root; prints the .deb's path on the host.
build_deb() {
    rm -rf "$ROOT/var/tmp/claims-deb"
    chroot "$ROOT" /usr/bin/env -i "${inner_env[@]}" bash -c "$inner_script" inner deb.sh >&2 || return 1
    ls "$ROOT"/var/tmp/claims-deb/postgresql-"$PG_MAJOR"-claims_*.deb 2>/dev/null | head -n 1
}

if [ "${CLAIMS_PG17_RUN:-test}" = deb ]; then
    deb="$(build_deb)" && [ -n "$deb" ] || fail "make deb in the root failed"
    mkdir -p "$REPO/build/deb" && cp "$ROOT"/var/tmp/claims-deb/*.deb "$REPO/build/deb/" ||
        fail "could not copy the packages"
    echo "test_pg17.sh: $REPO/build/deb/$(basename "$deb")"
    exit 0
fi

if [ "${CLAIMS_PG17_RUN:-test}" = bench ]; then
    echo "test_pg17.sh: benchmarking in the Debian $SUITE root $ROOT with PostgreSQL $PG_MAJOR"
    stamp="$ROOT/var/tmp/claims-bench.start"
    touch "$stamp"
    chroot "$ROOT" /usr/bin/env -i "${inner_env[@]}" bash -c "$inner_script" inner bench
    rc=$?
    # A table the run wrote in its copy of the tree (a full run's
    # bench/RESULTS.md) is kept beside the 15 one, as bench/RESULTS-pg17.md.
    results="$ROOT/var/tmp/claims-src/bench/RESULTS.md"
    if [ "$results" -nt "$stamp" ]; then
        cp "$results" "$REPO/bench/RESULTS-pg$PG_MAJOR.md" &&
            echo "test_pg17.sh: the table is in bench/RESULTS-pg$PG_MAJOR.md"
    fi
    exit $rc
fi

echo "test_pg17.sh: testing in the Debian $SUITE root $ROOT with PostgreSQL $PG_MAJOR"
out="$ROOT/var/tmp/claims-test_pg17.out"
chroot "$ROOT" /usr/bin/env -i "${inner_env[@]}" bash -c "$inner_script" inner test.sh 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
last="$(tail -n 1 "$out" 2>/dev/null)"
if ! [[ "$last" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
    fail "the run inside the root did not finish (status $rc, $(($(date +%s) - start)) s)"
fi
passed=${BASH_REMATCH[1]}
failed=${BASH_REMATCH[2]}

# The package suite, from the host: postgresql-17-claims built in the root,
# installed on a fresh copy of the pristine Debian 13 root.
if [ "${CLAIMS_PACKAGE_TEST:-1}" != 0 ]; then
    echo
    echo "=== package (make deb PG=17, installed on a clean root) ==="
    pkg_out="$(dirname "$ROOT")/test_package-$PG_MAJOR.out"
    if deb="$(build_deb)" && [ -n "$deb" ]; then
        unmount_all
        "$REPO/scripts/test_package.sh" "$PG_MAJOR" "$deb" 2>&1 | tee "$pkg_out"
    else
        echo "test_pg17.sh: make deb in the root failed" | tee "$pkg_out"
    fi
    if [[ "$(tail -n 1 "$pkg_out")" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        passed=$((passed + BASH_REMATCH[1]))
        failed=$((failed + BASH_REMATCH[2]))
    else
        failed=$((failed + 1))
    fi
    echo
    echo "$passed passed, $failed failed"
fi
if [ "$failed" -ne 0 ] || [ "$rc" -ne 0 ]; then
    exit 1
fi
exit 0
