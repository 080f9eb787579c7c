#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tests of tests/tools/fault_proxy.py: every fault kind, seen from a client on a raw socket.

Two proxies are chained: ORIGIN serves a directory (no faults), PROXY forwards to ORIGIN and
applies the plan each test installs through /__proxy/plan. So both modes are exercised.
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PROXY = os.path.join(HERE, "fault_proxy.py")
SIZE = 200000


def ramp(seed, off, n):
    return bytes((seed + off + i) % 251 for i in range(n))


def start(args, tmp, name):
    port_file = os.path.join(tmp, name + ".port")
    p = subprocess.Popen([sys.executable, PROXY, "--port-file", port_file] + args,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 10
    while not os.path.exists(port_file):
        if p.poll() is not None or time.time() > deadline:
            p.kill()
            raise RuntimeError("%s did not start: %s" % (name, p.stderr.read().decode()))
        time.sleep(0.02)
    with open(port_file) as f:
        return p, int(f.read())


class FaultProxyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="fault_proxy_test.")
        os.makedirs(os.path.join(cls.tmp, "objs", "b"))
        with open(os.path.join(cls.tmp, "objs", "b", "k.tar.zst"), "wb") as f:
            f.write(ramp(5, 0, SIZE))
        cls.origin, cls.origin_port = start(["--origin-dir", os.path.join(cls.tmp, "objs")], cls.tmp, "origin")
        cls.proxy, cls.port = start(["--upstream", "http://127.0.0.1:%d" % cls.origin_port, "--seed", "7"],
                                    cls.tmp, "proxy")

    @classmethod
    def tearDownClass(cls):
        for p in (cls.proxy, cls.origin):
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()

    def control(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request(method, "/__proxy/" + path, body=body)
        r = c.getresponse()
        data = r.read()
        c.close()
        self.assertEqual(r.status, 200, path)
        return data

    def plan(self, rules):
        self.control("PUT", "plan", json.dumps(rules))

    def setUp(self):
        self.plan([])
        self.start_n = json.loads(self.control("GET", "log"))["count"]

    def get(self, start=0, length=1000, headers=None, timeout=10):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Range": "bytes=%d-%d" % (start, start + length - 1)}
        h.update(headers or {})
        c.request("GET", "/b/k.tar.zst", headers=h)
        r = c.getresponse()
        return c, r

    def test_passthrough_range_and_etag(self):
        c, r = self.get(1000, 5000)
        self.assertEqual(r.status, 206)
        self.assertEqual(r.getheader("Content-Range"), "bytes 1000-5999/%d" % SIZE)
        self.assertEqual(r.read(), ramp(5, 1000, 5000))
        etag = r.getheader("ETag")
        c.close()
        c, r = self.get(0, 10, {"If-Match": etag})
        self.assertEqual(r.status, 206)
        r.read()
        c, r = self.get(0, 10, {"If-Match": '"other"'})
        self.assertEqual(r.status, 412)

    def test_status_codes_with_and_without_retry_after(self):
        self.plan([{"requests": [self.start_n + 1, self.start_n + 1], "fault": "status", "code": 503, "retry_after": 2},
                   {"requests": [self.start_n + 2, self.start_n + 2], "fault": "status", "code": 500},
                   {"requests": [self.start_n + 3, self.start_n + 3], "fault": "status", "code": 429}])
        _, r = self.get()
        self.assertEqual((r.status, r.getheader("Retry-After")), (503, "2"))
        self.assertIn(b"<Code>SlowDown</Code>", r.read())
        _, r = self.get()
        self.assertEqual((r.status, r.getheader("Retry-After")), (500, None))
        self.assertIn(b"InternalError", r.read())
        _, r = self.get()
        self.assertEqual(r.status, 429)
        r.read()
        _, r = self.get()
        self.assertEqual(r.status, 206)
        self.assertEqual(r.read(), ramp(5, 0, 1000))

    def test_expire_after_n_requests_then_recover(self):
        self.plan([{"requests": [self.start_n + 3, None], "fault": "expire"}])
        for _ in range(2):
            _, r = self.get()
            self.assertEqual(r.status, 206)
            r.read()
        for _ in range(3):
            _, r = self.get()
            self.assertEqual(r.status, 403)
            self.assertIn(b"ExpiredToken", r.read())
        self.control("POST", "clear")
        _, r = self.get()
        self.assertEqual(r.status, 206)
        r.read()

    def test_reset_mid_body(self):
        self.plan([{"fault": "reset", "after_bytes": 100}])
        c, r = self.get(0, 50000)
        self.assertEqual(r.status, 206)
        with self.assertRaises((ConnectionResetError, http.client.IncompleteRead)):
            r.read()

    def test_truncated_body_keeps_status_and_length(self):
        self.plan([{"fault": "truncate", "keep_bytes": 300}])
        c, r = self.get(0, 1000)
        self.assertEqual(r.status, 206)
        self.assertEqual(r.getheader("Content-Length"), "1000")
        with self.assertRaises(http.client.IncompleteRead) as cm:
            r.read()
        self.assertEqual(cm.exception.partial, ramp(5, 0, 300))

    def test_stall_then_continue_and_stall_then_close(self):
        self.plan([{"requests": [self.start_n + 1, self.start_n + 1], "fault": "stall", "after_bytes": 10, "seconds": 0.6},
                   {"requests": [self.start_n + 2, self.start_n + 2], "fault": "stall", "seconds": 5, "then": "close"}])
        t0 = time.time()
        _, r = self.get(0, 1000)
        self.assertEqual(r.read(), ramp(5, 0, 1000))
        self.assertGreaterEqual(time.time() - t0, 0.6)
        # A client with a 1 s timeout sees no byte at all.
        _, r = self.get(0, 1000, timeout=1)
        with self.assertRaises(socket.timeout):
            r.read()

    def test_slow_drip(self):
        self.plan([{"fault": "drip", "bytes_per_sec": 4000}])
        t0 = time.time()
        _, r = self.get(0, 2000)
        self.assertEqual(r.read(), ramp(5, 0, 2000))
        self.assertGreaterEqual(time.time() - t0, 0.4)

    def test_flipped_bits_are_seeded_and_counted(self):
        self.plan([{"fault": "flip", "bits": 3}])
        _, r = self.get(0, 4000)
        data = r.read()
        good = ramp(5, 0, 4000)
        diff = sum(bin(a ^ b).count("1") for a, b in zip(data, good))
        self.assertIn(diff, (1, 3))  # two flips of the same bit cancel; 3 distinct is the norm
        self.assertEqual(len(data), 4000)

    def test_wrong_content_range(self):
        self.plan([{"fault": "bad_range", "shift": 16}])
        _, r = self.get(100, 100)
        self.assertEqual(r.getheader("Content-Range"), "bytes 116-215/%d" % SIZE)
        self.assertEqual(r.read(), ramp(5, 100, 100))

    def test_object_replaced_between_reads(self):
        _, r = self.get(0, 10)
        etag = r.getheader("ETag")
        r.read()
        self.plan([{"requests": [self.start_n + 2, None], "fault": "replace"}])
        _, r = self.get(0, 10, {"If-Match": etag})
        self.assertEqual(r.status, 412)
        r.read()
        _, r = self.get(0, 100)
        self.assertNotEqual(r.getheader("ETag"), etag)
        self.assertNotEqual(r.read(), ramp(5, 0, 100))

    def test_path_method_matches_and_log(self):
        self.plan([{"path": "k.tar", "method": "GET", "matches": [2, 2], "fault": "status", "code": 500}])
        codes = []
        for _ in range(3):
            _, r = self.get()
            codes.append(r.status)
            r.read()
        self.assertEqual(codes, [206, 500, 206])
        log = [e for e in json.loads(self.control("GET", "log"))["log"] if e["n"] > self.start_n]
        self.assertEqual([e["fault"] for e in log], [None, "status", None])
        self.assertEqual([e["n"] for e in log], [self.start_n + 1, self.start_n + 2, self.start_n + 3])

    def test_one_in_is_reproducible_for_a_seed(self):
        rules = [{"fault": "status", "code": 503, "one_in": 3}]
        runs = []
        for _ in range(2):
            tmp = tempfile.mkdtemp(dir=self.tmp)
            plan_file = os.path.join(tmp, "plan.json")
            with open(plan_file, "w") as f:
                json.dump(rules, f)
            p, port = start(["--upstream", "http://127.0.0.1:%d" % self.origin_port, "--seed", "11",
                             "--plan", plan_file], tmp, "p")
            try:
                codes = []
                for _ in range(30):
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                    c.request("GET", "/b/k.tar.zst", headers={"Range": "bytes=0-9"})
                    r = c.getresponse()
                    r.read()
                    codes.append(r.status)
                    c.close()
                runs.append(codes)
            finally:
                p.terminate()
                p.wait(5)
        self.assertEqual(runs[0], runs[1])
        self.assertIn(503, runs[0])
        self.assertIn(206, runs[0])

    def test_put_goes_through_atomically(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request("PUT", "/b/new", body=b"x" * 5000)
        r = c.getresponse()
        r.read()
        self.assertEqual(r.status, 200)
        with open(os.path.join(self.tmp, "objs", "b", "new"), "rb") as f:
            self.assertEqual(f.read(), b"x" * 5000)
        self.assertEqual([n for n in os.listdir(os.path.join(self.tmp, "objs", "b")) if n.startswith(".put")], [])


if __name__ == "__main__":
    unittest.main(verbosity=1)
