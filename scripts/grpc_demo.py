#!/usr/bin/python3
"""grpc_demo.py: the gRPC part of `make run`.

Usage: grpc_demo.py REPO CERT_DIR STUB_DIR TARGET

Calls the claims-grpc that scripts/run.sh started in front of the demo
store, as GitLab's Rails client would (mutual TLS, ClaimService), with a
client generated from the project's grpc/proto files: cell 1 leases a
username, cell 2 runs into the lease (ABORTED), cell 1 commits, cell 2 now
meets a taken value (ALREADY_EXISTS), an administrator looks the value up,
and cell 1 trying to act for cell 2 is refused (PERMISSION_DENIED). Prints
every request and answer. Exits non-zero when an answer is not the one
expected.
"""

import json
import os
import sys
import time

REPO, CERTS, STUBS, TARGET = sys.argv[1:5]
sys.path.insert(0, os.path.join(REPO, "test", "grpc"))
import claimsgrpc  # noqa: E402

FAILED = []


def show(step, who, method, req, expect, **kw):
    """Make one call, print it and its answer, note an unexpected code."""
    print("== %s" % step)
    print("   %s -> %s %s" % (who, method, json.dumps(req)))
    r = client.call(who, method, req, **kw)
    if r["code"] == "OK":
        print("   OK %s" % json.dumps(r.get("resp", {})))
    else:
        print("   %s: %s" % (r["code"], r["details"]))
    if r["code"] != expect:
        print("   (expected %s)" % expect)
        FAILED.append(step)
    print()
    return r


def record(value, ident):
    return {"bucket": {"type": "USERNAMES", "value": value},
            "subject": {"type": "USER", "id": ident},
            "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": "AAAAAAAAAAE="}}


stub = claimsgrpc.load(os.path.join(REPO, "grpc"), STUBS)
client = claimsgrpc.Client(TARGET, CERTS, stub)

# Wait (at most 20 s) for the gateway to answer SERVING.
health = {}
for _ in range(100):
    health = client.health("cell-one", timeout=2.0)
    if health.get("status") == "SERVING":
        break
    time.sleep(0.2)
print("== claims-grpc at %s: health %s" % (TARGET, health.get("status", health.get("code"))))
print()
if health.get("status") != "SERVING":
    sys.exit("grpc_demo.py: claims-grpc is not serving: %s" % health)

value = "grpc-alice-%d" % int(time.time())
show("GetCells: the registered cells (any authenticated caller)", "cell-one", "GetCells", {}, "OK")
r = show("1. cell 1 (certificate CN cell-one) begins claiming %s" % value, "cell-one",
         "BeginUpdate", {"cell_id": 1, "create_records": [record(value, 42)]}, "OK")
lease = r.get("resp", {}).get("lease_uuid")
show("2. cell 2 wants the same value while cell 1's lease is outstanding (temporary: ABORTED)",
     "cell-two", "BeginUpdate", {"cell_id": 2, "create_records": [record(value, 7)]}, "ABORTED")
show("3. cell 1 commits its lease", "cell-one", "CommitUpdate",
     {"cell_id": 1, "lease_uuid": lease}, "OK")
show("4. cell 2 tries again: the value is taken for good (ALREADY_EXISTS)", "cell-two",
     "BeginUpdate", {"cell_id": 2, "create_records": [record(value, 7)]}, "ALREADY_EXISTS")
show("5. an administrator (CN claims-admin) looks the value up", "claims-admin", "GetRecord",
     {"bucket": {"type": "USERNAMES", "value": value}}, "OK")
show("6. cell 1 tries to act for cell 2 (PERMISSION_DENIED: matching cell only)", "cell-one",
     "BeginUpdate", {"cell_id": 2, "create_records": [record(value + "-x", 8)]}, "PERMISSION_DENIED")

if FAILED:
    sys.exit("grpc_demo.py: unexpected answers in: %s" % "; ".join(FAILED))
print("== Done: every answer was the expected one.")
