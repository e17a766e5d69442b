#!/usr/bin/env bash
# test_pg17.sh: `make test PG=17`. Runs the whole of `make test` (every suite
# of both extensions) against PostgreSQL 17 from a Debian 13 (trixie) root,
# on this Debian 12 machine, whose own PostgreSQL (15) is left alone.
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
MOUNTED=()

# Print the failure summary and exit.
fail() {
    echo "test_pg17.sh: $*"
    echo
    echo "0 passed, 1 failed"
    exit 1
}

# The Debian archive the host's apt uses (deb822 or one-line sources).
host_mirror() {
    local uri
    uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
        2>/dev/null | grep -v -E '^[[:space:]]*#' | grep -oE 'https?://[^ ]+/debian/?( |$)' | grep -v -- '-security' | head -n 1)
    uri="${uri%% }"
    echo "${uri:-http://deb.debian.org/debian}"
}

# Unmount what this run mounted, last first (EXIT trap).
# shellcheck disable=SC2317  # invoked by trap
cleanup() {
    local i m
    for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
        m="${MOUNTED[$i]}"
        umount -R "$m" 2>/dev/null || umount -R -l "$m" 2>/dev/null ||
            echo "test_pg17.sh: could not unmount $m" >&2
    done
    MOUNTED=()
}

# Mount points under the root (left behind by a run that was killed).
mounts_under_root() {
    awk -v root="$(realpath -m "$ROOT")" '$5 == root || index($5, root "/") == 1 { print $5 }' \
        /proc/self/mountinfo
}

# Unmount what a killed run left mounted; fail when something stays.
clear_stale_mounts() {
    local m
    while IFS= read -r m; do
        umount -R -l "$m" 2>/dev/null || true
    done < <(mounts_under_root | sort -r)
    [ -z "$(mounts_under_root)" ]
}

# Mount with mount(8)'s arguments; the last one is the mount point.
do_mount() {
    local target="${*: -1}"
    mkdir -p "$target" || return 1
    mount "$@" || return 1
    MOUNTED+=("$target")
}

# Settings the root needs before packages are installed: no service starts
# at install time (the host's servers own the network namespace) and no
# "main" cluster; the host's resolver for apt.
configure_root() {
    printf '#!/bin/sh\n# no service starts inside the claims test root\nexit 101\n' \
        >"$ROOT/usr/sbin/policy-rc.d" &&
        chmod 755 "$ROOT/usr/sbin/policy-rc.d" &&
        mkdir -p "$ROOT/etc/postgresql-common" &&
        echo 'create_main_cluster = false' >"$ROOT/etc/postgresql-common/createcluster.conf" &&
        cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
}

# Make the root once: debootstrap into a scratch directory, then move it in
# place, so a run that died half-way is never mistaken for a root.
make_root() {
    local mirror
    [ -f "$READY" ] && return 0
    if ! command -v debootstrap >/dev/null 2>&1; then
        echo "test_pg17.sh: installing debootstrap"
        apt-get update >/dev/null &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap ||
            return 1
    fi
    mirror="${CLAIMS_DEBIAN_MIRROR:-$(host_mirror)}"
    echo "test_pg17.sh: making a Debian $SUITE root in $ROOT from $mirror"
    # never remove a tree with something (say /dev) mounted in it
    clear_stale_mounts || return 1
    rm -rf --one-file-system "$ROOT.partial" "$ROOT" || return 1
    mkdir -p "$(dirname "$ROOT")" || return 1
    debootstrap --variant=minbase "$SUITE" "$ROOT.partial" "$mirror" >"$(dirname "$ROOT")/debootstrap.log" 2>&1 || {
        tail -n 30 "$(dirname "$ROOT")/debootstrap.log"
        return 1
    }
    mv "$ROOT.partial" "$ROOT" && touch "$READY"
}

[ "$(id -u)" -eq 0 ] || fail "must run as root (debootstrap, chroot and mounts)"
mkdir -p "$(dirname "$ROOT")" || fail "cannot create $(dirname "$ROOT")"
# one run per root at a time: the mounts and the root's PostgreSQL are shared
exec 9>"$ROOT.lock" || fail "cannot open $ROOT.lock"
flock -n 9 || { echo "test_pg17.sh: waiting for another run on $ROOT"; flock 9; }
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$(date +%s)
clear_stale_mounts || fail "mounts left under $ROOT by an earlier run could not be removed"
make_root || fail "could not make the Debian $SUITE root"
configure_root || fail "could not configure the root"

do_mount -t proc proc "$ROOT/proc" || fail "could not mount /proc"
do_mount --rbind /dev "$ROOT/dev" || fail "could not bind /dev"
mount --make-rslave "$ROOT/dev" 2>/dev/null || true
do_mount --bind "$REPO" "$ROOT/mnt/claims" || fail "could not bind the repository"
mount -o remount,bind,ro "$ROOT/mnt/claims" 2>/dev/null || true

# Variables of the run inside: a clean environment, plus CLAIMS_* settings.
inner_env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
    LANG=C.UTF-8 TERM=dumb PG_CONFIG="$INNER_PG_CONFIG" CLAIMS_PG_MAJOR="$PG_MAJOR")
while IFS= read -r var; do
    case "$var" in
        CLAIMS_PG17_ROOT=* | CLAIMS_DEBIAN_MIRROR=* | CLAIMS_PG_MAJOR=* | CLAIMS_TEST_SUMMARY_FILE=*) ;;
        CLAIMS_*=*) inner_env+=("$var") ;;
    esac
done < <(env)

# The copy inside the root: the tree as test.sh's own copy takes it, and no
# build output.
inner_script='
set -u
src=/var/tmp/claims-src
rm -rf "$src" && mkdir -p "$src" || exit 1
tar -C /mnt/claims --anchored --exclude=./.git --exclude=./build --exclude="./tmp_check*" \
    --exclude="./cell/tmp_check*" --exclude=./results --exclude=./cell/results \
    --exclude=./output_iso --exclude=./log --exclude=./cell/log --exclude=./.run \
    --exclude="*.o" --exclude="*.so" --exclude="*.bc" -cf - . | tar -C "$src" -xf - || exit 1
cd "$src" && exec bash "$src/scripts/test.sh"
'
echo "test_pg17.sh: testing in the Debian $SUITE root $ROOT with PostgreSQL $PG_MAJOR"
out="$ROOT/var/tmp/claims-test_pg17.out"
chroot "$ROOT" /usr/bin/env -i "${inner_env[@]}" bash -c "$inner_script" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
last="$(tail -n 1 "$out" 2>/dev/null)"
if ! [[ "$last" =~ ^[0-9]+\ passed,\ [0-9]+\ failed$ ]]; then
    fail "the run inside the root did not finish (status $rc, $(($(date +%s) - start)) s)"
fi
if [ "$rc" -eq 0 ] && [[ "$last" =~ [1-9][0-9]*\ failed$ ]]; then
    rc=1
fi
exit "$rc"
