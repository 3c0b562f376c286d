#!/usr/bin/env python3
"""A Gatehouse webhook receiver in plain Python (standard library only).

Run:  WEBHOOK_SECRET=whsec_... PORT=9000 python3 receiver.py

It checks `X-Gatehouse-Signature: t=<unix>,v1=<hex>` over the *raw* request
bytes (never re-serialised JSON), refuses a `t` more than 300 s away from now
(replay protection), and acknowledges each `X-Gatehouse-Delivery` id once:
deliveries are at-least-once, so a retry of something already handled is
answered 200 without being processed again.
"""

import hashlib
import hmac
import json
import os
import time
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Lock

TOLERANCE_SECONDS = 300


def verify(secret: str, header: str, body: bytes, now=None, tolerance=TOLERANCE_SECONDS) -> bool:
    """True if `header` is a valid signature of `body` made within `tolerance` seconds of `now`.

    The key is the whole secret string, `whsec_` included; the signed bytes are `<t>.<raw body>`.
    """
    parts = {}
    for item in (header or "").split(","):
        key, sep, value = item.strip().partition("=")
        if not sep:
            return False
        if key in parts:  # exactly one t and one v1
            return False
        parts[key] = value
    try:
        t = int(parts["t"])
        v1 = parts["v1"]
    except (KeyError, ValueError):
        return False
    now = time.time() if now is None else now
    if abs(now - t) > tolerance:
        return False
    expected = hmac.new(secret.encode(), str(t).encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, v1)


class SeenDeliveries:
    """The last `capacity` delivery ids, for deduplication (a database table in production)."""

    def __init__(self, capacity=10_000):
        self.ids = OrderedDict()
        self.capacity = capacity
        self.lock = Lock()

    def first_time(self, delivery_id: str) -> bool:
        with self.lock:
            if delivery_id in self.ids:
                return False
            self.ids[delivery_id] = True
            if len(self.ids) > self.capacity:
                self.ids.popitem(last=False)
            return True


SECRET = os.environ.get("WEBHOOK_SECRET", "")
SEEN = SeenDeliveries()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not verify(SECRET, self.headers.get("X-Gatehouse-Signature", ""), body):
            return self.answer(401, "bad signature")
        delivery = self.headers.get("X-Gatehouse-Delivery", "")
        if not SEEN.first_time(delivery):
            return self.answer(200, "duplicate, already handled")
        event = json.loads(body)
        print(f"{event['type']} {event['id']} (delivery {delivery}): {json.dumps(event['data'])}", flush=True)
        self.answer(200, "ok")

    def answer(self, status, text):
        payload = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    if not SECRET.startswith("whsec_"):
        raise SystemExit("set WEBHOOK_SECRET to the endpoint's whsec_... secret")
    port = int(os.environ.get("PORT", "9000"))
    print(f"listening on http://127.0.0.1:{port}/", flush=True)
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
