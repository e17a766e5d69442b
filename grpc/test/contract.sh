#!/usr/bin/env bash
# contract.sh: the wire contract of grpc/proto/ against GitLab's reference
# descriptor set (TAP). Checks the descriptors compiled into the binaries,
# the ones protoc makes from the files, and that a changed field number in a
# copy of the files is caught (the comparison can fail).
set -u
cd "$(dirname "$0")/.."
B=build
REF=test/claims_v1.pb
fail=0
n=0
tap() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi; }

echo "1..4"
out=$("$B/proto_contract_test" "$REF" 2>&1); rc=$?
echo "$out" | sed 's/^/# /'
tap $rc "the descriptors compiled into claims-grpc match $REF"
out=$("$B/proto_contract_test" "$REF" "$B/ours.pb" 2>&1); rc=$?
echo "$out" | sed 's/^/# /'
tap $rc "the descriptors protoc makes from grpc/proto match $REF"

# A copy with Record.cell_id renumbered 3 -> 33 must fail, naming the field.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r proto "$tmp/"
sed -i 's/^  int64 cell_id = 3;/  int64 cell_id = 33;/' "$tmp/proto/claims/v1/messages.proto"
if ! grep -q 'cell_id = 33;' "$tmp/proto/claims/v1/messages.proto"; then
    tap 1 "the mutation was applied"
else
    tap 0 "the mutation was applied"
fi
(cd "$tmp" && protoc -I. --include_imports -o mutated.pb proto/claims/v1/service.proto)
out=$("$B/proto_contract_test" "$REF" "$tmp/mutated.pb" 2>&1); rc=$?
echo "$out" | sed 's/^/# /'
if [ "$rc" -ne 0 ] && echo "$out" | grep -q 'Record.cell_id: number is 33, reference has 3'; then
    tap 0 "a renumbered field fails the comparison"
else
    tap 1 "a renumbered field fails the comparison"
fi
exit $fail
