#!/usr/bin/env bash
# scripts/meta_json.sh: write META.json (PGXN) from META.json.in with the
# versions of the two control files, so that no version is kept twice.
# PGXN wants semantic versions: an extension's "1.2" is "1.2.0". The
# distribution's version is the higher of the two, so a release of either
# extension is a release of the distribution.
set -eu
cd "$(dirname "$0")/.."
ver() { sed -n "s/^default_version = '\(.*\)'/\1/p" "$1"; }
semver() { case "$1" in *.*.*) echo "$1" ;; *) echo "$1.0" ;; esac; }
store="$(semver "$(ver claims.control)")"
cell="$(semver "$(ver cell/claims_cell.control)")"
dist="$(printf '%s\n%s\n' "$store" "$cell" | sort -V | tail -n 1)"
sed -e "s/@DIST_VERSION@/$dist/" -e "s/@CLAIMS_VERSION@/$store/" -e "s/@CLAIMS_CELL_VERSION@/$cell/" \
    META.json.in >"${1:-META.json}"
