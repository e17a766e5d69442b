#!/usr/bin/python3
"""grpc_helper.py: the gRPC side of test/grpc/t/*.pl.

Usage: grpc_helper.py PROTO_ROOT STUB_DIR CERT_DIR TARGET

Reads one JSON command per line on stdin and answers each with one JSON
line on stdout (a command that fails answers {"error": "..."}):

  {"op": "call", "as": IDENT, "method": M, "req": {...}, "timeout": S,
   "raw": {"next": B64}, "fresh": BOOL}
      -> {"code", "details", "resp", "raw", "elapsed"}
  {"op": "health", "as": IDENT}                 -> {"code", "status"}
  {"op": "burst", "calls": [{"as", "method", "req", "timeout",
   "cancel_after"}...]}  all at once, one thread each
      -> {"results": [...]}, in the order given
  {"op": "load_start", "as": IDENT, "cell_id": N, "threads": T,
   "prefix": P, "max_seconds": S}   BeginUpdate + CommitUpdate loops
  {"op": "load_peek"} -> {"counts": {...}} so far
  {"op": "load_stop"} -> {"counts": {"Method CODE": n}, "uncommitted": [uuid...]}
  {"op": "reset"}   close the cached channels
  {"op": "quit"}

IDENT is an identity of claimsgrpc.Client. Every loop is bounded in time.
"""

import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import claimsgrpc  # noqa: E402


def burst(client, calls):
    """Start every call at once (futures), cancel those asked to; collect."""
    starts = []
    for c in calls:
        msg = client.request(c["method"], c.get("req"))
        fn, _ = client.stub_method(c.get("as", "cell-one"), c["method"])
        starts.append((c, fn.future(msg, timeout=c.get("timeout", 10.0)), time.monotonic()))
    cancels = sorted((c["cancel_after"], i) for i, (c, _, _) in enumerate(starts)
                     if c.get("cancel_after") is not None)
    t0 = time.monotonic()
    for after, i in cancels:
        delay = t0 + after - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        starts[i][1].cancel()
    results = []
    for c, fut, t in starts:
        try:
            out = claimsgrpc.result_ok(fut.result(timeout=60))
        except grpc.FutureCancelledError:
            out = {"code": "CANCELLED", "details": "cancelled by the client"}
        except grpc.RpcError as e:
            out = claimsgrpc.result_error(e)
        results.append(out)
    return {"results": results}


class Load:
    """Threads doing BeginUpdate + CommitUpdate of fresh values until stopped."""

    def __init__(self, client, cmd):
        self.client = client
        self.cmd = cmd
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.counts = {}
        self.uncommitted = []
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True)
                        for i in range(cmd.get("threads", 4))]
        for t in self.threads:
            t.start()

    def count(self, key):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + 1

    def run(self, tid):
        cmd, cell = self.cmd, self.cmd["cell_id"]
        ident = cmd.get("as", "cell-one")
        deadline = time.monotonic() + cmd.get("max_seconds", 60)
        n = 0
        while not self.stop.is_set() and time.monotonic() < deadline:
            n += 1
            value = "%s-%d-%d" % (cmd.get("prefix", "load"), tid, n)
            req = {"cell_id": cell, "create_records": [{
                "bucket": {"type": "USERNAMES", "value": value},
                "subject": {"type": "USER", "id": 1000 + n},
                "source": {"type": "RAILS_TABLE_USERS",
                           "rails_primary_key_id": "AAAAAAAAAAE="}}]}
            r = self.client.call(ident, "BeginUpdate", req, timeout=2.0)
            self.count("BeginUpdate " + r["code"])
            if r["code"] != "OK":
                time.sleep(0.05)
                continue
            lease = r["resp"]["lease_uuid"]
            c = self.client.call(ident, "CommitUpdate",
                                 {"cell_id": cell, "lease_uuid": lease}, timeout=2.0)
            self.count("CommitUpdate " + c["code"])
            if c["code"] != "OK":
                with self.lock:
                    self.uncommitted.append(lease["value"])
                time.sleep(0.05)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)
        return {"counts": self.counts, "uncommitted": self.uncommitted,
                "alive": sum(t.is_alive() for t in self.threads)}


def handle(client, state, cmd):
    op = cmd["op"]
    if op == "call":
        t = time.monotonic()
        out = client.call(cmd.get("as", "cell-one"), cmd["method"], cmd.get("req"),
                          cmd.get("timeout", 10.0), cmd.get("raw"), cmd.get("fresh", False))
        out["elapsed"] = time.monotonic() - t
        return out
    if op == "health":
        return client.health(cmd.get("as", "cell-one"), cmd.get("timeout", 5.0))
    if op == "burst":
        return burst(client, cmd["calls"])
    if op == "load_start":
        state["load"] = Load(client, cmd)
        return {"started": True}
    if op == "load_peek":
        with state["load"].lock:
            return {"counts": dict(state["load"].counts)}
    if op == "load_stop":
        return state.pop("load").finish()
    if op == "reset":
        client.reset()
        return {"reset": True}
    raise ValueError("unknown op " + op)


def main():
    proto_root, stub_dir, cert_dir, target = sys.argv[1:5]
    stub = claimsgrpc.load(proto_root, stub_dir)
    client = claimsgrpc.Client(target, cert_dir, stub)
    state = {}
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("op") == "quit":
            break
        try:
            out = handle(client, state, cmd)
        except Exception as e:  # reported to the test, which fails on it
            out = {"error": "%s: %s" % (type(e).__name__, e)}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
