"""inject_proxy.py PORT SOCKET FLAG: a TCP proxy to a PostgreSQL Unix socket
that answers the first query holding "SET claims.json_output" with an error
(57014) of its own while the file FLAG exists, and removes FLAG; everything
else passes through. For tests of a failing session setup."""
import os
import socket
import struct
import sys
import threading

port, sock_path, flag = int(sys.argv[1]), sys.argv[2], sys.argv[3]


def error_reply():
    body = b'SERROR\0VERROR\0C57014\0Mcanceling statement due to user request\0\0'
    return b'E' + struct.pack('!I', len(body) + 4) + body + b'Z' + struct.pack('!I', 5) + b'I'


def pump(src, dst, from_client):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if from_client and b'SET claims.json_output' in data and os.path.exists(flag):
                os.unlink(flag)
                src.sendall(error_reply())
                continue
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(('127.0.0.1', port))
listener.listen(64)
while True:
    client, _ = listener.accept()
    server = socket.socket(socket.AF_UNIX)
    server.connect(sock_path)
    threading.Thread(target=pump, args=(client, server, True), daemon=True).start()
    threading.Thread(target=pump, args=(server, client, False), daemon=True).start()
