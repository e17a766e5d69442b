#!/usr/bin/env bash
# deps.sh: make sure this Debian machine has what building, running and
# testing the claims extension needs (for PostgreSQL 15 on Debian 12, or 17
# on Debian 13), and an unprivileged OS user ("claims")
# to own PostgreSQL servers (initdb refuses to run as root).
# Safe to run any number of times; it installs only what is missing.
set -u

# The PostgreSQL major version: CLAIMS_PG_MAJOR, else the one PG_CONFIG's
# path names (/usr/lib/postgresql/NN/bin/pg_config), else 15. Debian 12
# ships 15; scripts/test_pg17.sh runs this script inside a Debian 13 root
# for 17.
PG_MAJOR="${CLAIMS_PG_MAJOR:-}"
if [ -z "$PG_MAJOR" ] && [[ "${PG_CONFIG:-}" =~ ^/usr/lib/postgresql/([0-9]+)/bin/pg_config$ ]]; then
    PG_MAJOR="${BASH_REMATCH[1]}"
fi
PG_MAJOR="${PG_MAJOR:-15}"

PACKAGES=(
    make
    gcc
    "postgresql-$PG_MAJOR"
    "postgresql-server-dev-$PG_MAJOR"
    "postgresql-$PG_MAJOR-pgtap"
    libtap-parser-sourcehandler-pgtap-perl
    libipc-run-perl
    openssl
    python3-grpcio
    python3-protobuf
    # the monitoring suite: promtool, a Prometheus server and the exporter
    prometheus
    prometheus-postgres-exporter
    # the cell orm suite's applications
    ruby-activerecord
    ruby-pg
    python3-django
    python3-psycopg2
    python3-sqlalchemy
    # claims-grpc: C++, gRPC, protobuf, libpq
    g++
    pkg-config
    libpq-dev
    libssl-dev
    libgrpc++-dev
    libprotobuf-dev
    protobuf-compiler
    protobuf-compiler-grpc
)
# The HA suite (ha/test/t): Patroni on etcd, and pgbouncer in front of the
# store. Debian 12 (PostgreSQL 15) only: the suite is not run on 17.
HA_PACKAGES=()
if [ "$PG_MAJOR" = 15 ]; then
    HA_PACKAGES=(patroni python3-etcd etcd-server pgbouncer procps)
    PACKAGES+=("${HA_PACKAGES[@]}")
fi
RUN_USER="${CLAIMS_OS_USER:-claims}"

# Print the packages of PACKAGES that dpkg does not report as installed.
missing_packages() {
    local pkg status
    for pkg in "${PACKAGES[@]}"; do
        status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
        if [ "$status" != "install ok installed" ]; then
            echo "$pkg"
        fi
    done
}

# Install the missing packages (root only); otherwise say what to install.
install_packages() {
    local missing
    mapfile -t missing < <(missing_packages)
    if [ "${#missing[@]}" -eq 0 ]; then
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo "deps.sh: missing packages: ${missing[*]}" >&2
        echo "deps.sh: install them as root with:" >&2
        echo "    apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
        return 1
    fi
    echo "deps.sh: installing ${missing[*]}"
    apt-get update || return 1
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" || return 1
    stop_ha_services "${missing[@]}"
    mapfile -t missing < <(missing_packages)
    if [ "${#missing[@]}" -ne 0 ]; then
        echo "deps.sh: still missing after install: ${missing[*]}" >&2
        return 1
    fi
}

# The HA suite starts etcd, Patroni and pgbouncer itself, on free loopback
# ports: stop and disable the services their packages (of the arguments,
# just installed) enabled, so nothing of the suite's runs as a service.
stop_ha_services() {
    local pkg unit
    command -v systemctl >/dev/null 2>&1 || return 0
    for pkg in "$@"; do
        case "$pkg" in
            etcd-server) unit=etcd ;;
            patroni | pgbouncer) unit=$pkg ;;
            *) continue ;;
        esac
        systemctl disable --now "$unit.service" >/dev/null 2>&1 || true
    done
}

# Create the unprivileged server/test user when running as root.
ensure_user() {
    if [ "$(id -u)" -ne 0 ]; then
        return 0
    fi
    if ! id -u "$RUN_USER" >/dev/null 2>&1; then
        echo "deps.sh: creating system user $RUN_USER"
        useradd --system --create-home --shell /bin/bash "$RUN_USER" || return 1
    fi
}

install_packages || exit 1
ensure_user || exit 1
exit 0
