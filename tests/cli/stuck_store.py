#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# A store endpoint that misbehaves on purpose, for the signal and retry tests:
#   stuck_store.py silent PORTFILE   accepts connections and never answers (nor closes them)
#   stuck_store.py busy PORTFILE     answers every request at once with 503 SlowDown
#   stuck_store.py nobucket PORTFILE answers 404 NoSuchBucket
#   stuck_store.py denied PORTFILE   answers 403 SignatureDoesNotMatch
# Listens on 127.0.0.1 on a free port and writes the port to PORTFILE. Runs until killed.
import socket
import sys
import threading

mode, port_file = sys.argv[1], sys.argv[2]
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", 0))
server.listen(64)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.getsockname()[1]))
import os
os.rename(port_file + ".tmp", port_file)
held = []


REPLIES = {
    "busy": (b"503 Slow Down", b"SlowDown"),
    "nobucket": (b"404 Not Found", b"NoSuchBucket"),
    "denied": (b"403 Forbidden", b"SignatureDoesNotMatch"),
}


def answer(conn):
    status, code = REPLIES[mode]
    body = b"<Error><Code>" + code + b"</Code><Message>from stuck_store.py</Message></Error>"
    try:
        while True:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            conn.sendall(b"HTTP/1.1 %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n%s" % (status, len(body), body))
    except OSError:
        pass


while True:
    conn, _ = server.accept()
    if mode == "silent":
        held.append(conn)  # never read, never answered, never closed
    else:
        threading.Thread(target=answer, args=(conn,), daemon=True).start()
