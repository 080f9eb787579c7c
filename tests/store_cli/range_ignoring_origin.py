#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# An HTTP origin for one file that behaves like a presigned URL on s3rver (issue 18 item 12):
# GET honours "Range: bytes=A-B" except when B is 0 (s3rver takes "bytes=0-0" as no range and
# answers 200 with the whole object); HEAD is refused with 403 (a presigned URL is valid for GET
# only). Logs "METHOD RANGE STATUS" per request to LOGFILE.
# Usage: range_ignoring_origin.py FILE PORTFILE LOGFILE
import http.server
import os
import re
import sys

path, port_file, log_file = sys.argv[1], sys.argv[2], sys.argv[3]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _log(self, status):
        with open(log_file, "a") as f:
            f.write("%s %s %d\n" % (self.command, self.headers.get("Range", "-"), status))

    def do_HEAD(self):
        self._log(403)
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        data = open(path, "rb").read()
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", ""))
        start = end = None
        if m and m.group(1) and m.group(2) and int(m.group(2)) != 0:
            start, end = int(m.group(1)), min(int(m.group(2)), len(data) - 1)
        elif m and not m.group(1) and m.group(2):  # suffix
            start, end = max(0, len(data) - int(m.group(2))), len(data) - 1
        if start is None:
            self._log(200)
            self.send_response(200)
            body = data
        else:
            self._log(206)
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, len(data)))
            body = data[start:end + 1]
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"v1"')
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
