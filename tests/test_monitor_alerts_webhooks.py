"""Webhook delivery (evaluators.monitor.webhooks) against a real loopback HTTP receiver that checks the
signature the way a receiver would, from its own HMAC of the raw body."""
from __future__ import annotations

import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evaluators.monitor.webhooks import deliver, verify

SECRET = "s3cret-for-tests"


class Receiver:
    """Answers each POST with the next status of ``plan`` (then 200), recording the bodies it verified."""

    def __init__(self, plan=(), reply=b"ok"):
        self.plan = list(plan)
        self.reply = reply
        self.got: list[tuple[bytes, str, bool]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                sig = self.headers.get("X-Signature", "")
                want = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
                outer.got.append((body, sig, hmac.compare_digest(want, sig)))
                status = outer.plan.pop(0) if outer.plan else 200
                self.send_response(status)
                self.send_header("Content-Length", str(len(outer.reply)))
                self.end_headers()
                self.wfile.write(outer.reply)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


ALERT = {"metric": "violence", "condition": "defect rate above 8%", "rate": 0.061, "n": 420}


def test_signed_json_body_is_verified_by_the_receiver():
    with Receiver() as rx:
        d = deliver(rx.url, ALERT, SECRET, sleep=lambda s: None)
    assert (d.delivered, d.attempts, d.error) == (True, 1, None)
    body, sig, ok = rx.got[0]
    assert ok and json.loads(body) == ALERT
    assert verify(body, sig, SECRET) and not verify(body, sig, "other")


def test_retries_with_exponential_backoff_then_delivers():
    waits: list[float] = []
    with Receiver(plan=[500, 503, 429]) as rx:
        d = deliver(rx.url, ALERT, SECRET, backoff=0.5, sleep=waits.append)
    assert (d.delivered, d.attempts) == (True, 4)
    assert waits == [0.5, 1.0, 2.0]
    assert len(rx.got) == 4 and all(ok for _, _, ok in rx.got)


def test_gives_up_after_five_failures_without_the_secret_in_the_error():
    waits: list[float] = []
    with Receiver(plan=[500] * 9) as rx:
        d = deliver(rx.url, ALERT, SECRET, sleep=waits.append)
    assert (d.delivered, d.attempts) == (False, 5)
    assert len(rx.got) == 5 and waits == [1.0, 2.0, 4.0, 8.0]
    assert d.error == "gave up after 5 attempts to 127.0.0.1: HTTP 500"
    assert SECRET not in d.error


def test_an_oversized_reply_is_a_failure():
    with Receiver(reply=b"x" * 2000) as rx:
        d = deliver(rx.url, ALERT, SECRET, attempts=2, max_reply=1000, sleep=lambda s: None)
    assert (d.delivered, d.attempts) == (False, 2)
    assert d.error.endswith("reply over 1000 bytes")


def test_bad_url_or_empty_secret_raise():
    with pytest.raises(ValueError, match="http"):
        deliver("file:///etc/passwd", ALERT, SECRET)
    with pytest.raises(ValueError, match="non-empty secret"):
        deliver("http://127.0.0.1:9/hook", ALERT, "")
