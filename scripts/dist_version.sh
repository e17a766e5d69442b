#!/usr/bin/env bash
# scripts/dist_version.sh: the version of the distribution (META.json, the
# Debian package), from the two control files: the higher of the two
# extensions' default_version, as a semantic version ("1.2" is "1.2.0").
set -eu
cd "$(dirname "$0")/.."
ver() { sed -n "s/^default_version = '\(.*\)'/\1/p" "$1"; }
semver() { case "$1" in *.*.*) echo "$1" ;; *) echo "$1.0" ;; esac; }
case "${1:-dist}" in
    claims) semver "$(ver claims.control)" ;;
    claims_cell) semver "$(ver cell/claims_cell.control)" ;;
    *) printf '%s\n%s\n' "$(semver "$(ver claims.control)")" "$(semver "$(ver cell/claims_cell.control)")" |
        sort -V | tail -n 1 ;;
esac
