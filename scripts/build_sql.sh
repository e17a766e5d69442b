#!/bin/sh
# scripts/build_sql.sh TEMPLATE OUTPUT: an extension script from its template.
#
# A template (src/sql/*.sql, cell/src/sql/*.sql) is SQL in which a line
#   #include "udfs/NAME/VERSION.sql"
# stands for that file (relative to the template's directory), copied byte
# for byte. Nothing else is changed, so a released script is rebuilt exactly.
set -eu
template="$1"
out="$2"
dir="$(dirname "$template")"
mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
awk -v dir="$dir" '
    /^#include "[^"]*"$/ {
        path = $0
        sub(/^#include "/, "", path)
        sub(/"$/, "", path)
        file = dir "/" path
        n = 0
        while ((getline line < file) > 0) { print line; n++ }
        if (n == 0) { print "build_sql.sh: cannot read " file > "/dev/stderr"; exit 1 }
        close(file)
        next
    }
    { print }
' "$template" >"$tmp"
mv "$tmp" "$out"
trap - EXIT
