#!/usr/bin/env bash
# scripts/meta_json.sh [FILE]: write META.json (PGXN) from META.json.in with
# the versions of the two control files (scripts/dist_version.sh), so that
# no version is kept twice.
set -eu
cd "$(dirname "$0")/.."
sed -e "s/@DIST_VERSION@/$(scripts/dist_version.sh)/" \
    -e "s/@CLAIMS_VERSION@/$(scripts/dist_version.sh claims)/" \
    -e "s/@CLAIMS_CELL_VERSION@/$(scripts/dist_version.sh claims_cell)/" \
    META.json.in >"${1:-META.json}"
