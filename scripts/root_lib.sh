# scripts/root_lib.sh: Debian roots for the runs that need another system
# than this machine's (sourced by test_pg17.sh and test_package.sh): made
# with debootstrap from the archive this machine already uses, entered with
# chroot, with mounts that are always undone. As root only.

MOUNTED=()

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
unmount_all() {
    local i m
    for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
        m="${MOUNTED[$i]}"
        umount -R "$m" 2>/dev/null || umount -R -l "$m" 2>/dev/null ||
            echo "root_lib.sh: could not unmount $m" >&2
    done
    MOUNTED=()
}

# Mount points under a root (left behind by a run that was killed).
mounts_under_root() {
    awk -v root="$(realpath -m "$1")" '$5 == root || index($5, root "/") == 1 { print $5 }' \
        /proc/self/mountinfo
}

# Unmount what a killed run left mounted under a root; fail when something stays.
clear_stale_mounts() {
    local m
    while IFS= read -r m; do
        umount -R -l "$m" 2>/dev/null || true
    done < <(mounts_under_root "$1" | sort -r)
    [ -z "$(mounts_under_root "$1")" ]
}

# Mount with mount(8)'s arguments; the last one is the mount point.
do_mount() {
    local target="${*: -1}"
    mkdir -p "$target" || return 1
    mount "$@" || return 1
    MOUNTED+=("$target")
}

# Mount /proc and /dev in a root.
mount_system() {
    do_mount -t proc proc "$1/proc" || return 1
    do_mount --rbind /dev "$1/dev" || return 1
    mount --make-rslave "$1/dev" 2>/dev/null || true
}

# The security archive the host's apt uses.
host_security_mirror() {
    local uri
    uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
        2>/dev/null | grep -v -E '^[[:space:]]*#' | grep -oE 'https?://[^ ]+/debian-security/?( |$)' | head -n 1)
    uri="${uri%% }"
    echo "${uri:-http://deb.debian.org/debian-security}"
}

# Settings a root needs before packages are installed: the release's
# updates and security archives next to its main one (as on the host, so a
# package built here finds the same PostgreSQL minor release), no service
# starts at install time (the host's servers own the network namespace) and
# no "main" cluster; the host's resolver for apt.
configure_root() {
    local root=$1 suite mirror
    suite="$(sed -n 's/^VERSION_CODENAME=//p' "$root/etc/os-release")"
    mirror="${CLAIMS_DEBIAN_MIRROR:-$(host_mirror)}"
    if [ -n "$suite" ]; then
        printf 'deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n' \
            "$mirror" "$suite" "$mirror" "$suite" "$(host_security_mirror)" "$suite" \
            >"$root/etc/apt/sources.list" || return 1
    fi
    printf '#!/bin/sh\n# no service starts inside the claims test root\nexit 101\n' \
        >"$root/usr/sbin/policy-rc.d" &&
        chmod 755 "$root/usr/sbin/policy-rc.d" &&
        mkdir -p "$root/etc/postgresql-common" &&
        echo 'create_main_cluster = false' >"$root/etc/postgresql-common/createcluster.conf" &&
        cp -L /etc/resolv.conf "$root/etc/resolv.conf"
}

# debootstrap_root SUITE ROOT: a minimal Debian SUITE in ROOT, made once
# (ROOT/.claims-root-ready marks it done): debootstrap into a scratch
# directory, then move it in place, so a run that died half-way is never
# mistaken for a root. CLAIMS_DEBIAN_MIRROR overrides the archive.
debootstrap_root() {
    local suite=$1 root=$2 mirror log
    [ -f "$root/.claims-root-ready" ] && return 0
    if ! command -v debootstrap >/dev/null 2>&1; then
        echo "root_lib.sh: installing debootstrap"
        apt-get update >/dev/null &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap >/dev/null ||
            return 1
    fi
    mirror="${CLAIMS_DEBIAN_MIRROR:-$(host_mirror)}"
    echo "root_lib.sh: making a Debian $suite root in $root from $mirror"
    # never remove a tree with something (say /dev) mounted in it
    clear_stale_mounts "$root" && clear_stale_mounts "$root.partial" || return 1
    rm -rf --one-file-system "$root.partial" "$root" || return 1
    mkdir -p "$(dirname "$root")" || return 1
    log="$(dirname "$root")/debootstrap-$suite.log"
    debootstrap --variant=minbase "$suite" "$root.partial" "$mirror" >"$log" 2>&1 || {
        tail -n 30 "$log"
        return 1
    }
    mv "$root.partial" "$root" && touch "$root/.claims-root-ready"
}

# copy_root FROM TO: a fresh copy of a pristine root.
copy_root() {
    clear_stale_mounts "$2" || return 1
    rm -rf --one-file-system "$2" || return 1
    cp -a "$1" "$2"
}
