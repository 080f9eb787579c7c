#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""fault_proxy.py: a fault-injecting HTTP/1.1 proxy for lazycache's reliability tests.

It listens on loopback and forwards every request to an upstream S3 or HTTP server (--upstream),
or answers itself from a directory (--origin-dir: GET/HEAD with Range, ETag and If-Match, PUT with
temp name + rename), and applies a scripted, seeded fault plan per request.

Requests are numbered from 1 in arrival order (control requests under /__proxy/ are not counted).
The plan is a JSON list of rules; the first rule that matches a request decides its fault:

  {"requests": [FIRST, LAST],   # global request numbers (LAST null = no end); default all
   "method": "GET",             # optional
   "path": "substring",         # optional, matched against the request target
   "matches": [FIRST, LAST],    # optional: only the FIRST..LAST-th request this rule matched
   "one_in": N,                 # optional: fire on about 1 in N matched requests (seeded)
   "unless_key": "AKID",        # optional: skip requests SigV4-signed with this access key id
   "fault": NAME, ...params}

Faults (the body is the upstream's response body; Content-Length stays the upstream's unless said):
  reset      send status, headers and `after_bytes` (default 0) body bytes, then a TCP RST
  stall      send status, headers and `after_bytes` body bytes, sleep `seconds`, then send the rest
             (or close if "then": "close")
  drip       send the body at `bytes_per_sec` (default 1024) in small writes
  status     answer `code` (500, 503, 429, 403, ...) without asking upstream; `retry_after`
             (seconds) adds a Retry-After header; `s3_code` sets the XML <Code> (defaults:
             InternalError, SlowDown, SlowDown, ExpiredToken)
  expire     403 ExpiredToken: the credentials "expired" (use requests [N, null] for "after N")
  truncate   correct status and Content-Length, but only `keep_bytes` (default half) of the body,
             then a normal close (FIN)
  flip       flip `bits` (default 1) seeded bit positions in the body
  bad_range  rewrite Content-Range: start shifted by `shift` (default 1) bytes, same length
  replace    the object "was replaced": requests carrying If-Match get 412 PreconditionFailed;
             others get a new ETag and a body with one bit flipped

Control endpoints (plain HTTP on the same port, for test scripts):
  GET  /__proxy/log     {"count": requests numbered so far, "log": [{"n", "method", "path",
                        "status", "fault"}, ...]} (a request is logged once its status is known)
  PUT  /__proxy/plan    replace the plan with the JSON body (request numbers keep counting)
  POST /__proxy/clear   empty plan (faults stop: e.g. credentials "come back")
  GET  /__proxy/health  200 "ok"

Usage: fault_proxy.py (--upstream http://HOST:PORT | --origin-dir DIR) [--port N] [--plan FILE]
       [--seed N] [--port-file FILE] [--log FILE]
Prints "fault_proxy: listening on 127.0.0.1:PORT" once ready. Stops on SIGTERM/SIGINT.
"""
import argparse
import http.client
import http.server
import json
import os
import random
import re
import signal
import socket
import socketserver
import struct
import sys
import tempfile
import threading
import time
import urllib.parse

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
              "upgrade", "expect"}
DEFAULT_S3_CODES = {500: "InternalError", 503: "SlowDown", 429: "SlowDown", 403: "ExpiredToken",
                    412: "PreconditionFailed"}


class Plan:
    """The rules, the request counter and the record of what was done. Thread-safe."""

    def __init__(self, rules, seed):
        self.lock = threading.Lock()
        self.rules = list(rules)
        self.rule_hits = [0] * len(self.rules)
        self.seed = seed
        self.count = 0
        self.log = []

    def replace(self, rules):
        with self.lock:
            self.rules = list(rules)
            self.rule_hits = [0] * len(self.rules)

    def decide(self, method, path, authorization=""):
        """Numbers the request and returns (n, rule or None, rng for this request)."""
        with self.lock:
            self.count += 1
            n = self.count
            rng = random.Random(self.seed * 1000003 + n)
            for i, rule in enumerate(self.rules):
                first, last = rule.get("requests") or [1, None]
                if n < first or (last is not None and n > last):
                    continue
                if "method" in rule and rule["method"] != method:
                    continue
                if "path" in rule and rule["path"] not in path:
                    continue
                if "unless_key" in rule and ("Credential=%s/" % rule["unless_key"]) in authorization:
                    continue
                self.rule_hits[i] += 1
                if "matches" in rule:
                    mf, ml = rule["matches"]
                    if self.rule_hits[i] < mf or (ml is not None and self.rule_hits[i] > ml):
                        continue
                if "one_in" in rule and rng.randrange(int(rule["one_in"])) != 0:
                    continue
                return n, rule, rng
            return n, None, rng

    def record(self, n, method, path, status, fault):
        with self.lock:
            self.log.append({"n": n, "method": method, "path": path, "status": status, "fault": fault})


def s3_error_body(code, s3_code, path):
    return ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code>"
            "<Message>injected by fault_proxy (HTTP %d)</Message><Resource>%s</Resource></Error>"
            % (s3_code, code, path)).encode()


class Origin:
    """A minimal object server over a directory: enough for the read-only HTTP store and tests."""

    def __init__(self, root):
        self.root = os.path.abspath(root)

    def _file(self, path):
        rel = urllib.parse.unquote(urllib.parse.urlsplit(path).path).lstrip("/")
        full = os.path.abspath(os.path.join(self.root, rel))
        if not full.startswith(self.root + os.sep):
            return None
        return full

    @staticmethod
    def _etag(st):
        return '"%x-%x-%x"' % (st.st_ino, st.st_size, st.st_mtime_ns)

    def handle(self, method, path, headers, body):
        """Returns (status, [(name, value)], body bytes)."""
        full = self._file(path)
        if full is None:
            return 400, [], b"bad path"
        if method == "PUT":
            os.makedirs(os.path.dirname(full), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(full), prefix=".put.")
            with os.fdopen(fd, "wb") as f:
                f.write(body)
            os.rename(tmp, full)
            return 200, [("ETag", self._etag(os.stat(full)))], b""
        if method not in ("GET", "HEAD"):
            return 405, [], b""
        try:
            with open(full, "rb") as f:
                st = os.fstat(f.fileno())
                etag = self._etag(st)
                im = headers.get("If-Match")
                if im and im != etag:
                    return 412, [("ETag", etag)], s3_error_body(412, "PreconditionFailed", path)
                size = st.st_size
                rng = headers.get("Range")
                hdrs = [("ETag", etag), ("Accept-Ranges", "bytes"),
                        ("Last-Modified", time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(st.st_mtime)))]
                if not rng:
                    data = f.read() if method == "GET" else b""
                    return 200, hdrs + [("Content-Length", str(size))], data
                m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
                if not m or (m.group(1) == "" and m.group(2) == ""):
                    return 416, hdrs, b""
                if m.group(1) == "":
                    start, end = max(0, size - int(m.group(2))), size - 1
                else:
                    start = int(m.group(1))
                    end = min(size - 1, int(m.group(2))) if m.group(2) else size - 1
                if start >= size or end < start:
                    return 416, hdrs + [("Content-Range", "bytes */%d" % size)], b""
                f.seek(start)
                data = f.read(end - start + 1) if method == "GET" else b""
                return 206, hdrs + [("Content-Range", "bytes %d-%d/%d" % (start, end, size)),
                                    ("Content-Length", str(end - start + 1))], data
        except FileNotFoundError:
            return 404, [], s3_error_body(404, "NoSuchKey", path)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fault_proxy"

    def log_message(self, fmt, *args):  # quiet: the plan's log is the record
        if self.server.log_file:
            with self.server.log_lock, open(self.server.log_file, "a") as f:
                f.write("%s\n" % (fmt % args))

    # ---- request plumbing ----
    def _read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                line = self.rfile.readline()
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _upstream(self, method, body):
        """Forwards to upstream (or the origin dir). Returns (status, headers list, body)."""
        srv = self.server
        if srv.origin:
            status, out, data = srv.origin.handle(method, self.path, self.headers, body)
            if not any(k.lower() == "content-length" for k, _ in out):
                out.append(("Content-Length", str(len(data))))
            return status, out, data
        hdrs = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        if body or method in ("PUT", "POST"):
            hdrs["Content-Length"] = str(len(body))
        if not hasattr(self, "up_conn") or self.up_conn is None:
            self.up_conn = http.client.HTTPConnection(srv.up_host, srv.up_port, timeout=120)
        for attempt in range(2):
            try:
                self.up_conn.request(method, self.path, body=body or None, headers=hdrs)
                resp = self.up_conn.getresponse()
                data = resp.read()
                out = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP
                       and k.lower() != "content-length"]
                if method != "HEAD":
                    out.append(("Content-Length", str(len(data))))
                elif resp.getheader("Content-Length") is not None:
                    out.append(("Content-Length", resp.getheader("Content-Length")))
                return resp.status, out, data
            except (http.client.HTTPException, OSError):
                # A kept-alive upstream connection may have been closed by the server: reconnect once.
                self.up_conn.close()
                self.up_conn = http.client.HTTPConnection(srv.up_host, srv.up_port, timeout=120)
                if attempt == 1:
                    return 502, [("Content-Length", "0")], b""
        return 502, [], b""

    def _send_head(self, status, headers, content_length=None):
        self.send_response_only(status)
        seen_len = False
        for k, v in headers:
            if k.lower() == "content-length":
                seen_len = True
                if content_length is not None:
                    v = str(content_length)
            self.send_header(k, v)
        if not seen_len and content_length is not None:
            self.send_header("Content-Length", str(content_length))
        self.end_headers()
        self.wfile.flush()

    def _reset(self):
        # SO_LINGER with a zero timeout turns close() into a RST: a "connection reset by peer".
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    # ---- control ----
    def _control(self, method):
        srv = self.server
        if self.path == "/__proxy/log" and method == "GET":
            with srv.plan.lock:
                data = json.dumps({"count": srv.plan.count, "log": srv.plan.log}).encode()
        elif self.path == "/__proxy/health":
            data = b"ok"
        elif self.path == "/__proxy/plan" and method == "PUT":
            srv.plan.replace(json.loads(self._read_body() or b"[]"))
            data = b"ok"
        elif self.path == "/__proxy/clear" and method == "POST":
            self._read_body()
            srv.plan.replace([])
            data = b"ok"
        else:
            self._read_body()
            self._send_head(404, [], 0)
            return
        self._send_head(200, [("Content-Type", "application/json")], len(data))
        self.wfile.write(data)

    # ---- one request ----
    def _handle(self, method):
        if self.path.startswith("/__proxy/"):
            return self._control(method)
        body = self._read_body()
        n, rule, rng = self.server.plan.decide(method, self.path, self.headers.get("Authorization", ""))
        fault = rule["fault"] if rule else None
        record = lambda status: self.server.plan.record(n, method, self.path, status, fault)

        if fault in ("status", "expire"):
            code = int(rule.get("code", 403 if fault == "expire" else 503))
            s3_code = rule.get("s3_code", DEFAULT_S3_CODES.get(code, "InternalError"))
            data = s3_error_body(code, s3_code, self.path)
            hdrs = [("Content-Type", "application/xml")]
            if "retry_after" in rule:
                hdrs.append(("Retry-After", str(rule["retry_after"])))
            record(code)
            self._send_head(code, hdrs, len(data))
            if method != "HEAD":
                self.wfile.write(data)
            return
        if fault == "replace" and self.headers.get("If-Match"):
            data = s3_error_body(412, "PreconditionFailed", self.path)
            record(412)
            self._send_head(412, [("Content-Type", "application/xml")], len(data))
            if method != "HEAD":
                self.wfile.write(data)
            return

        status, headers, data = self._upstream(method, body)
        record(status)
        if method == "HEAD" or not fault:
            if fault == "replace":
                headers = [(k, v + "-replaced" if k.lower() == "etag" else v) for k, v in headers]
            self._send_head(status, headers)
            if method != "HEAD":
                self.wfile.write(data)
            return

        if fault == "flip" and data:
            data = bytearray(data)
            for _ in range(int(rule.get("bits", 1))):
                pos = rng.randrange(len(data) * 8)
                data[pos // 8] ^= 1 << (pos % 8)
            data = bytes(data)
        elif fault == "replace" and data:
            headers = [(k, v + "-replaced" if k.lower() == "etag" else v) for k, v in headers]
            data = bytearray(data)
            data[rng.randrange(len(data))] ^= 0x10
            data = bytes(data)
        elif fault == "bad_range":
            shift = int(rule.get("shift", 1))
            def shifted(v):
                m = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", v.strip())
                if not m:
                    return v
                a, b = int(m.group(1)) + shift, int(m.group(2)) + shift
                return "bytes %d-%d/%s" % (a, b, m.group(3))
            headers = [(k, shifted(v) if k.lower() == "content-range" else v) for k, v in headers]

        if fault in ("reset", "stall", "truncate"):
            cut = int(rule.get("keep_bytes", len(data) // 2)) if fault == "truncate" else int(rule.get("after_bytes", 0))
            cut = min(cut, len(data))
            self._send_head(status, headers, len(data))
            self.wfile.write(data[:cut])
            self.wfile.flush()
            if fault == "reset":
                return self._reset()
            if fault == "truncate":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_WR)
                return
            if self.server.sleep(float(rule.get("seconds", 5))) and rule.get("then") != "close":
                self.wfile.write(data[cut:])
            else:
                self.close_connection = True
            return
        if fault == "drip":
            rate = max(1, int(rule.get("bytes_per_sec", 1024)))
            step = max(1, rate // 20)
            self._send_head(status, headers, len(data))
            for i in range(0, len(data), step):
                self.wfile.write(data[i:i + step])
                self.wfile.flush()
                if not self.server.sleep(step / rate):
                    self.close_connection = True
                    return
            return
        self._send_head(status, headers, len(data))
        self.wfile.write(data)

    def _safe(self, method):
        try:
            self._handle(method)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def do_GET(self):
        self._safe("GET")

    def do_HEAD(self):
        self._safe("HEAD")

    def do_PUT(self):
        self._safe("PUT")

    def do_POST(self):
        self._safe("POST")

    def do_DELETE(self):
        self._safe("DELETE")

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass
        conn = getattr(self, "up_conn", None)
        if conn is not None:
            conn.close()


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, plan, upstream, origin, log_file):
        super().__init__(addr, Handler)
        self.plan = plan
        self.origin = origin
        self.log_file = log_file
        self.log_lock = threading.Lock()
        self.stopping = threading.Event()
        if upstream:
            u = urllib.parse.urlsplit(upstream)
            self.up_host, self.up_port = u.hostname, u.port or 80

    def sleep(self, seconds):
        """Sleeps unless the proxy is stopping; False if it is."""
        return not self.stopping.wait(seconds)


def main():
    ap = argparse.ArgumentParser(description="fault-injecting HTTP proxy for lazycache tests")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--upstream", help="http://HOST:PORT of the real server")
    src.add_argument("--origin-dir", help="serve objects from this directory instead")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--plan", help="JSON file with the fault rules")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--port-file", help="write the bound port here once listening")
    ap.add_argument("--log", help="append one line per request here")
    a = ap.parse_args()
    rules = []
    if a.plan:
        with open(a.plan) as f:
            rules = json.load(f)
    plan = Plan(rules, a.seed)
    origin = Origin(a.origin_dir) if a.origin_dir else None
    srv = Server(("127.0.0.1", a.port), plan, a.upstream, origin, a.log)
    port = srv.server_address[1]

    def stop(*_):
        srv.stopping.set()
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, a.port_file)
    print("fault_proxy: listening on 127.0.0.1:%d" % port, flush=True)
    srv.serve_forever(poll_interval=0.1)
    srv.server_close()


if __name__ == "__main__":
    main()
