#!/usr/bin/env bash
# test_cassert.sh: `make test PG=15-cassert`. Runs a subset of `make test`
# against PostgreSQL 15 built with assertions (--enable-cassert
# --enable-debug), so that a misuse of PostgreSQL's internals by either
# extension (a lock not held, a memory context or a snapshot used wrongly,
# a tuple descriptor or a resource owner left behind, ...) stops the server
# with a "TRAP: FailedAssertion" and a backtrace in its log, where Debian's
# production server would go on silently.
#
# As root:
#   1. the server: /var/cache/claims/pg15-cassert (CLAIMS_CASSERT_ROOT),
#      built once per machine and reused by later runs. It lives outside the
#      clone because CI runs each time in a fresh clone, where build/ is
#      empty, and the build takes far longer than test_pg17.sh's Debian 13
#      root. Built from the source package of the postgresql-15 installed
#      here (apt-get source, with a deb-src entry for the host's Debian
#      archives in /etc/apt/sources.list.d/claims-deb-src.sources; the next
#      older version when the mirror lacks that source), Debian's patches
#      applied, configured with --enable-cassert --enable-debug
#      --enable-tap-tests --with-openssl into that private prefix, with
#      `nice make -j2`, plus contrib/amcheck (the churn tests use it).
#      CLAIMS_CASSERT_REBUILD=1 builds it again;
#   2. the tree is copied without build output (objects compiled for
#      Debian's server have no assertions and must not be linked here) and
#      scripts/test.sh runs from the copy with that server's pg_config: it
#      builds and installs both extensions (-Werror) into the prefix and
#      runs, as the unprivileged user "claims", the suites named by
#      CLAIMS_SUITES (default: cell regress, cell TAP and the store's TAP
#      files matching *churn*, CLAIMS_TAP_FILES). test.sh counts every
#      "TRAP:" in a server log as a failure and prints it with its backtrace.
#
# The last line printed is test.sh's "N passed, N failed" (one failure when
# the server could not be built); the exit status is non-zero when anything
# failed. CLAIMS_* variables (CLAIMS_SUITE_TIMEOUT, ...) are passed on.
set -u

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="${CLAIMS_CASSERT_ROOT:-/var/cache/claims/pg15-cassert}"
READY="$PREFIX/.claims-cassert-ready"
BUILD_LOG="$PREFIX-build.log"
SOURCES_FILE=/etc/apt/sources.list.d/claims-deb-src.sources
# what configure, make and apt-get source need beyond scripts/deps.sh
BUILD_PACKAGES=(bison flex libreadline-dev zlib1g-dev libssl-dev pkg-config dpkg-dev
    libipc-run-perl gcc make patch xz-utils bzip2)

# Print the failure summary and exit.
fail() {
    echo "test_cassert.sh: $*"
    echo
    echo "0 passed, 1 failed"
    exit 1
}

# shellcheck source=scripts/root_lib.sh
. "$REPO/scripts/root_lib.sh"

# The postgresql-15 versions to try building, best first: the one installed
# here (the server the other suites run on), then those of the deb-src
# lists, newest first (the security archive may list a version whose
# source the mirror does not hold).
wanted_versions() {
    local v
    v=$(dpkg-query -W -f='${Version}' postgresql-15 2>/dev/null)
    [ -n "$v" ] && echo "$v"
    apt-cache showsrc postgresql-15 2>/dev/null | sed -n 's/^Version: //p' | sort -V -r -u | grep -v -x -F "${v:-none}"
}

# Install the build tools that are missing.
install_build_packages() {
    local pkg missing=()
    for pkg in "${BUILD_PACKAGES[@]}"; do
        [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] ||
            missing+=("$pkg")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    echo "test_cassert.sh: installing ${missing[*]}"
    apt-get update >/dev/null &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
}

# A deb-src entry for the host's Debian release, its updates and security
# archives (the installed postgresql-15 may come from either), then an
# update of those source lists only.
add_deb_src() {
    local suite mirror security
    suite="$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release)"
    [ -n "$suite" ] || return 1
    mirror="${CLAIMS_DEBIAN_MIRROR:-$(host_mirror)}"
    security="$(host_security_mirror)"
    # a malformed entry would stop every apt command on the machine
    [ -n "$mirror" ] && [ -n "$security" ] || return 1
    cat >"$SOURCES_FILE.new" <<EOF || return 1
# written by the claims project's scripts/test_cassert.sh (apt-get source postgresql-15)
Types: deb-src
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: $security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    mv "$SOURCES_FILE.new" "$SOURCES_FILE" || return 1
    apt-get update -o Dir::Etc::sourcelist="$SOURCES_FILE" -o Dir::Etc::sourceparts=- \
        -o APT::Get::List-Cleanup=0 >/dev/null
}

# Fetch and unpack the source package of version $1 into $2 (Debian's
# patches applied); prints the source directory.
get_source() {
    local version=$1 dir=$2
    rm -rf "$dir" && mkdir -p "$dir" || return 1
    (cd "$dir" && apt-get source -q "postgresql-15=$version" >"$dir/apt-get-source.log" 2>&1) || {
        tail -n 20 "$dir/apt-get-source.log"
        return 1
    }
    find "$dir" -mindepth 1 -maxdepth 1 -type d -name 'postgresql-15-*' | head -n 1
}

# Whether every directory compiled into the server (src/port's
# pg_config_paths.h in the source tree $1) lies under PREFIX.
paths_private() {
    local defs
    defs="$(grep -E '^#define [A-Z]+DIR "' "$1/src/port/pg_config_paths.h")" || return 1
    if grep -v -F "\"$PREFIX/" <<<"$defs"; then
        echo "test_cassert.sh: these directories are outside $PREFIX; not installing"
        return 1
    fi
}

# Empty PREFIX for a new build, only when it is ours: missing, empty, or
# marked by an earlier build (CLAIMS_CASSERT_ROOT may name any directory).
reset_prefix() {
    if [ -e "$PREFIX" ] && [ -n "$(ls -A "$PREFIX" 2>/dev/null)" ] &&
        [ ! -f "$READY" ] && [ ! -f "$PREFIX/.claims-cassert-building" ]; then
        echo "test_cassert.sh: $PREFIX is not empty and not an assert server of ours; not touching it"
        return 1
    fi
    rm -rf "$PREFIX" && mkdir -p "$PREFIX" && touch "$PREFIX/.claims-cassert-building"
}

# Configure, build and install into PREFIX (emptied first; the binaries
# keep its path for libpq, so the install is not moved afterwards).
# Debian's 50-per-version-dirs patch puts pkglibdir (the server's modules
# and PGXS) at /usr/lib/postgresql/15/lib, the system server's own, unless
# libdir names "postgres": hence --libdir, and a check before installing.
build_server() {
    local src=$1 log=$2
    reset_prefix || return 1
    (
        cd "$src" || exit 1
        # a top-level build of its own: run from `make test`, MAKELEVEL=1
        # would make PostgreSQL's build skip its generated headers
        # (submake-generated-headers runs at MAKELEVEL 0 only), and -j2
        # then races src/common against utils/errcodes.h
        unset MAKELEVEL MAKEFLAGS MFLAGS
        ./configure --prefix="$PREFIX" --libdir="$PREFIX/lib/postgresql" \
            --enable-cassert --enable-debug --enable-tap-tests \
            --with-openssl --without-icu --without-llvm || exit 1
        nice make -j2 || exit 1
        nice make -j2 -C contrib/amcheck || exit 1
        paths_private "$src" || exit 1
        make install && make -C contrib/amcheck install
    ) >"$log" 2>&1 || {
        tail -n 40 "$log"
        return 1
    }
}

# Build the server once: reused whenever READY is there (it holds the
# version built); CLAIMS_CASSERT_REBUILD=1 builds it again.
ensure_server() {
    local version="" v src="" scratch="$PREFIX-src" start
    if [ -f "$READY" ] && [ "${CLAIMS_CASSERT_REBUILD:-0}" != 1 ]; then
        echo "test_cassert.sh: reusing $PREFIX (PostgreSQL $(cat "$READY"), assertions enabled)"
        return 0
    fi
    start=$(date +%s)
    echo "test_cassert.sh: building PostgreSQL 15 with assertions into $PREFIX (once)"
    install_build_packages || { echo "test_cassert.sh: could not install the build tools"; return 1; }
    add_deb_src || { echo "test_cassert.sh: could not add $SOURCES_FILE"; return 1; }
    while IFS= read -r v; do
        if src="$(get_source "$v" "$scratch")" && [ -n "$src" ]; then
            version=$v
            break
        fi
        echo "test_cassert.sh: apt-get source postgresql-15=$v failed; trying the next version"
    done < <(wanted_versions)
    [ -n "$version" ] || { echo "test_cassert.sh: no source of postgresql-15 could be fetched"; return 1; }
    echo "test_cassert.sh: building postgresql-15 $version (log: $BUILD_LOG)"
    build_server "$src" "$BUILD_LOG" || return 1
    # READY last: a build that died half-way is never taken as done
    echo "$version" >"$READY" || return 1
    rm -rf "$scratch" "$PREFIX/.claims-cassert-building"
    echo "test_cassert.sh: built in $(($(date +%s) - start)) s"
}

# Remove the copy of the tree (EXIT trap).
# shellcheck disable=SC2317  # invoked by trap
cleanup() {
    [ -n "${COPY:-}" ] && [ -d "$COPY" ] && [ "${CLAIMS_KEEP_TMP:-0}" != 1 ] && rm -rf "$COPY"
    return 0
}

# Copy the tree to $1 as test.sh takes it, and without build output.
copy_source() {
    mkdir -p "$1" || return 1
    tar -C "$REPO" --anchored --exclude=./.git --exclude=./build --exclude='./tmp_check*' \
        --exclude='./cell/tmp_check*' --exclude=./results --exclude=./cell/results \
        --exclude=./output_iso --exclude=./log --exclude=./cell/log --exclude=./.run \
        --exclude='*.o' --exclude='*.so' --exclude='*.bc' -cf - . | tar -C "$1" -xf -
}

[ "$(id -u)" -eq 0 ] || fail "must run as root (apt-get, make install, runuser)"
mkdir -p "$(dirname "$PREFIX")" || fail "cannot create $(dirname "$PREFIX")"
# one run per server at a time: each run installs the extensions into it
exec 9>"$PREFIX.lock" || fail "cannot open $PREFIX.lock"
flock -n 9 || { echo "test_cassert.sh: waiting for another run on $PREFIX"; flock 9; }
COPY=""
trap cleanup EXIT
trap 'exit 130' INT TERM

ensure_server || fail "could not build PostgreSQL with assertions (see $BUILD_LOG)"
"$REPO/scripts/deps.sh" || fail "could not install dependencies"
runuser -u "${CLAIMS_OS_USER:-claims}" -- test -x "$PREFIX/bin/postgres" ||
    fail "user ${CLAIMS_OS_USER:-claims} cannot run $PREFIX/bin/postgres (a directory above it is not searchable)"
COPY="$(mktemp -d /tmp/claims-cassert.XXXXXX)" || fail "could not make a temporary directory"
copy_source "$COPY/repo" || fail "could not copy the work tree"

echo "test_cassert.sh: testing with PostgreSQL $(cat "$READY") built with assertions ($PREFIX)"
env PG_CONFIG="$PREFIX/bin/pg_config" CLAIMS_PACKAGE_TEST=0 \
    CLAIMS_SUITES="${CLAIMS_SUITES:-cell-regress cell-tap tap}" \
    CLAIMS_TAP_FILES="${CLAIMS_TAP_FILES:-*churn*}" \
    bash "$COPY/repo/scripts/test.sh"
