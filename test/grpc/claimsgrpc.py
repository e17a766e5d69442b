"""A Python client of claims-grpc for the tests, the demo and the benchmark.

The stubs are generated on the spot from the project's own .proto files
(grpc/proto/..., import root grpc/) with protoc --python_out and
grpc_python_plugin, so what is tested is what the project compiles; nothing
comes from the shared descriptor set. Requests and responses are handled as
proto3 JSON dicts (google.protobuf.json_format). Health checks are sent as
raw grpc.health.v1 messages (an empty request; field 1 of the answer).

Identities name certificate files in a directory written by make_certs.sh:
"cell-one" presents cell-one.crt/key and trusts ca.crt; "cell-one@new-ca"
trusts new-ca.crt instead; "nocert" presents no certificate; "plaintext"
uses no TLS at all.
"""

import base64
import glob
import importlib
import os
import shutil
import subprocess
import sys

import grpc
from google.protobuf import json_format, symbol_database

SERVICE = "gitlab.cells.topology_service.claims.v1.ClaimService"
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def generate(proto_root, out_dir):
    """Compile every .proto under proto_root/proto (the import root is
    proto_root) into out_dir; return the module names."""
    protos = sorted(os.path.relpath(p, proto_root)
                    for p in glob.glob(os.path.join(proto_root, "proto", "**", "*.proto"),
                                       recursive=True))
    if not protos:
        raise RuntimeError("no .proto files under %s" % proto_root)
    plugin = shutil.which("grpc_python_plugin")
    if plugin is None:
        raise RuntimeError("grpc_python_plugin is not installed (protobuf-compiler-grpc)")
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run(["protoc", "-I", proto_root, "--python_out=" + out_dir,
                    "--grpc_python_out=" + out_dir,
                    "--plugin=protoc-gen-grpc_python=" + plugin] + protos,
                   check=True)
    return [p[:-len(".proto")].replace("/", ".") for p in protos]


def load(proto_root, out_dir):
    """Generate and import the stubs; return the ClaimServiceStub class.

    Modules named grpc.* (a health.proto, if any) are not imported: their
    package would collide with grpcio's own.
    """
    names = generate(proto_root, out_dir)
    sys.path.insert(0, out_dir)
    stub = None
    for name in names:
        if name.startswith("grpc."):
            continue
        importlib.import_module(name + "_pb2")
        grpc_mod = importlib.import_module(name + "_pb2_grpc")
        stub = getattr(grpc_mod, "ClaimServiceStub", stub)
    if stub is None:
        raise RuntimeError("no ClaimService in the generated stubs")
    return stub


def message_class(full_name):
    """The generated class of a message by its full name."""
    return symbol_database.Default().GetSymbol(full_name)


class Client:
    """Channels per identity to one claims-grpc, and calls by method name."""

    def __init__(self, target, cert_dir, stub_class):
        self.target = target
        self.cert_dir = cert_dir
        self.stub_class = stub_class
        self.channels = {}
        pool = symbol_database.Default().pool
        self.service = pool.FindServiceByName(SERVICE)

    def _read(self, name):
        with open(os.path.join(self.cert_dir, name), "rb") as f:
            return f.read()

    def _new_channel(self, ident):
        opts = [("grpc.enable_retries", 0)]
        if ident == "plaintext":
            return grpc.insecure_channel(self.target, options=opts)
        name, _, trust = ident.partition("@")
        root = self._read((trust or "ca") + ".crt")
        if name == "nocert":
            creds = grpc.ssl_channel_credentials(root_certificates=root)
        else:
            creds = grpc.ssl_channel_credentials(
                root_certificates=root, private_key=self._read(name + ".key"),
                certificate_chain=self._read(name + ".crt"))
        return grpc.secure_channel(self.target, creds, options=opts)

    def channel(self, ident, fresh=False):
        """The cached channel of an identity (a new one when fresh)."""
        if fresh:
            return self._new_channel(ident)
        if ident not in self.channels:
            self.channels[ident] = self._new_channel(ident)
        return self.channels[ident]

    def reset(self):
        """Close every cached channel, so the next calls connect again."""
        for ch in self.channels.values():
            ch.close()
        self.channels = {}

    def request(self, method, req, raw=None):
        """Build the request message of a method from a JSON dict.

        raw maps field names to base64 of serialized submessages set as is
        (a ListLeases next token sent back byte for byte).
        """
        cls = message_class(self.service.methods_by_name[method].input_type.full_name)
        msg = json_format.ParseDict(req or {}, cls())
        for field, b64 in (raw or {}).items():
            getattr(msg, field).ParseFromString(base64.b64decode(b64))
        return msg

    def stub_method(self, ident, method, fresh=False):
        ch = self.channel(ident, fresh)
        return getattr(self.stub_class(ch), method), ch

    def call(self, ident, method, req, timeout=10.0, raw=None, fresh=False):
        """One call; returns {"code", "details", "resp", "raw"}."""
        msg = self.request(method, req, raw)
        fn, ch = self.stub_method(ident, method, fresh)
        try:
            resp = fn(msg, timeout=timeout)
            out = result_ok(resp)
        except grpc.RpcError as e:
            out = result_error(e)
        if fresh:
            ch.close()
        return out

    def health(self, ident, timeout=5.0, fresh=True):
        """grpc.health.v1.Health/Check for the whole server ("")."""
        ch = self.channel(ident, fresh)
        fn = ch.unary_unary(HEALTH_CHECK, request_serializer=lambda b: b,
                            response_deserializer=lambda b: b)
        try:
            data = fn(b"", timeout=timeout)
            out = {"code": "OK", "status": HEALTH_STATUS.get(parse_status(data), "?")}
        except grpc.RpcError as e:
            out = result_error(e)
        if fresh:
            ch.close()
        return out


def parse_status(data):
    """Field 1 (a varint enum) of a HealthCheckResponse; 0 when absent."""
    i, status = 0, 0
    while i < len(data):
        key = data[i]
        i += 1
        if key == 0x08:
            status, shift = 0, 0
            while True:
                b = data[i]
                i += 1
                status |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
        else:
            raise ValueError("unexpected field in HealthCheckResponse")
    return status


def result_ok(resp):
    out = {"code": "OK", "details": "",
           "resp": json_format.MessageToDict(resp, preserving_proto_field_name=True)}
    if resp.DESCRIPTOR.fields_by_name.get("next") is not None and resp.HasField("next"):
        out["raw"] = {"next": base64.b64encode(resp.next.SerializeToString()).decode()}
    return out


def result_error(e):
    code = e.code() if hasattr(e, "code") else None
    return {"code": code.name if code is not None else "UNKNOWN",
            "details": (e.details() if hasattr(e, "details") else str(e)) or ""}
