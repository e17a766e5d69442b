"""inject_proxy.py PORT SOCKET FLAG: a TCP proxy to a PostgreSQL Unix socket
that answers the first query holding "SET claims.json_output" with an error
of its own while the file FLAG exists, and removes FLAG; everything else
passes through. The error is 57014 (a cancel), or 42602 when FLAG holds
"42602" (the refusal of a store that reserved the claims prefix before it
had the setting). For tests of a failing session setup."""
import os
import socket
import struct
import sys
import threading

port, sock_path, flag = int(sys.argv[1]), sys.argv[2], sys.argv[3]


def error_reply(code):
    if code == '42602':
        body = (b'SERROR\0VERROR\0C42602\0Minvalid configuration parameter name "claims.json_output"\0'
                b'D"claims" is a reserved prefix.\0\0')
    else:
        body = b'SERROR\0VERROR\0C57014\0Mcanceling statement due to user request\0\0'
    return b'E' + struct.pack('!I', len(body) + 4) + body + b'Z' + struct.pack('!I', 5) + b'I'


def pump(src, dst, from_client):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if from_client and b'SET claims.json_output' in data and os.path.exists(flag):
                with open(flag) as f:
                    code = f.read().strip()
                os.unlink(flag)
                src.sendall(error_reply(code))
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
