"""The OTLP/HTTP receiver (`python -m evaluators monitor serve`) as a process, sent requests built with
opentelemetry-proto: each bad request gets its status and changes nothing else; a span acknowledged is committed
before the reply (a receiver SIGKILLed right after its 200s loses none); a store that cannot keep up is said with
503 / 429 and Retry-After, and what is sent again is stored once."""
from __future__ import annotations

import gzip
import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from evaluators.store.store import Store
from tests.conftest import ROOT, env_for_subprocess
from tests.monitor_procs import ReceiverProcess, pb_span, trace_response, traces_request, traces_request_json
from tests.procs import wait_until

JSON_TYPE = "application/json"


def spans_stored(store: Store) -> set[tuple[str, str]]:
    import sqlalchemy as sa

    with store.engine.connect() as c:
        return {tuple(r) for r in c.execute(sa.text("SELECT trace_id, span_id FROM monitor_spans"))}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evaluators", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env_for_subprocess(), timeout=120)


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


def test_each_bad_request_gets_its_status_and_changes_nothing_else(store_url):
    store = Store(store_url)
    made = [cli("monitor", "token", "create", "--project", "shop", "--db", store_url) for _ in range(2)]
    assert [p.returncode for p in made] == [0, 0], made[0].stderr
    token, revoked = (p.stdout.strip().splitlines()[-1].split()[-1] for p in made)  # the last word of the last line
    p = cli("monitor", "token", "revoke", revoked, "--db", store_url)
    assert p.returncode == 0 and "revoked token" in p.stdout and revoked not in p.stdout
    listed = cli("monitor", "token", "list", "--project", "shop", "--db", store_url).stdout.splitlines()
    assert sorted(line.split()[-1] == "active" or line.split()[-3] == "revoked" for line in listed) == [True, True]
    assert sorted(line.endswith("active") for line in listed) == [False, True]
    assert token not in "\n".join(listed) and revoked not in "\n".join(listed)
    with ReceiverProcess(store_url) as r:
        status, _, body = r.post("/v1/traces", traces_request([pb_span(1, 1)]), token)
        assert status == 200 and trace_response(body).partial_success.rejected_spans == 0
        before = spans_stored(store)
        assert before == {(f"{1:032x}", f"{1:016x}")}
        other = traces_request([pb_span(2, 2)])  # would add a span, were it taken
        for bad in (None, "evm_wrong", revoked):
            status, _, body = r.post("/v1/traces", other, bad, content_type=JSON_TYPE)
            assert status == 401, bad
            assert json.loads(body)["code"] == 16 and "ingest token" in json.loads(body)["message"]
        status, headers, _ = r.post("/v1/traces", b"\x0a\xff\xff\xff\xff\x0f", token)
        assert status == 400 and headers["content-type"] == "application/x-protobuf"
        status, _, body = r.post("/v1/traces", b'{"resourceSpans": [', token, content_type=JSON_TYPE)
        assert status == 400 and json.loads(body)["code"] == 3
        status, _, body = r.post("/v1/traces", os.urandom(30 * 2**20), token, content_type=JSON_TYPE)
        assert status == 413 and "31,457,280 bytes" in json.loads(body)["message"]
        bomb = gzip.compress(b"\0" * (200 * 2**20), 6)  # 200 MiB of zeros in ~200 KB
        assert len(bomb) < 2**20
        status, _, body = r.post("/v1/traces", bomb, token, content_type=JSON_TYPE,
                                 headers={"Content-Encoding": "gzip"})
        assert status == 413 and "decompresses to more than 20,971,520 bytes" in json.loads(body)["message"]
        assert peak_rss_mb(r.proc.pid) < 200  # 98 MB measured; the bomb undone whole: 458
        status, _, _ = r.post("/v1/traces", b"\x1f\x8b not gzip", token, headers={"Content-Encoding": "gzip"})
        assert status == 400
        assert spans_stored(store) == before and r.health()["pending_writes"] == 0
        wide = pb_span(3, 3, attributes={f"attr.{i}": i for i in range(10_000)})
        status, _, body = r.post("/v1/traces", traces_request([wide, pb_span(4, 4)]), token)
        reply = trace_response(body)
        assert status == 200 and reply.partial_success.rejected_spans == 1, reply
        assert "attribute" in reply.partial_success.error_message
        assert spans_stored(store) == before | {(f"{4:032x}", f"{4:016x}")}  # the other span of the request kept
        status, _, _ = r.post("/v1/traces", gzip.compress(traces_request([pb_span(5, 5)])), token,
                              headers={"Content-Encoding": "gzip"})
        assert status == 200 and (f"{5:032x}", f"{5:016x}") in spans_stored(store)
        body = traces_request_json([pb_span(6, 6, parent=5, name="json")])
        assert b'"traceId": "00000000000000000000000000000006"' in body
        status, headers, reply = r.post("/v1/traces", gzip.compress(body), token, content_type=JSON_TYPE,
                                        headers={"Content-Encoding": "gzip"})
        assert status == 200 and headers["content-type"] == JSON_TYPE and json.loads(reply) == {}
        spans, _ = store.trace_parts("shop", f"{6:032x}")
        assert [(s["span_id"], s["parent_span_id"], s["name"]) for s in spans] == [(f"{6:016x}", f"{5:016x}", "json")]
    assert token not in "".join(r.stderr) and revoked not in "".join(r.stderr)


def test_a_receiver_killed_right_after_its_replies_has_stored_every_span_it_acknowledged(store_url):
    """Four senders, 64 spans a request (on PostgreSQL, the COPY path: pgfast.COPY_FROM); the sender that gets the
    20th 200 SIGKILLs the receiver the instant it has it. Every span of every acknowledged request is in the store."""
    from evaluators.store.pgfast import COPY_FROM

    assert COPY_FROM <= 64
    store = Store(store_url)
    _, token = store.create_ingest_token("shop")
    acked: list[list[tuple[str, str]]] = []
    lock, stop = threading.Lock(), threading.Event()
    with ReceiverProcess(store_url) as r:
        def sender(k: int) -> None:
            for batch in range(1000):
                if stop.is_set():
                    return
                ids = [(k * 10**6 + batch * 100 + i, k * 10**6 + batch * 100 + i + 1) for i in range(64)]
                body = traces_request([pb_span(t, s, name=f"s{s}") for t, s in ids])
                try:
                    status, _, _ = r.post("/v1/traces", body, token)
                except OSError:
                    return  # killed
                with lock:
                    if status == 200 and not stop.is_set():
                        acked.append([(f"{t:032x}", f"{s:016x}") for t, s in ids])
                        if len(acked) == 20:
                            r.kill()  # right after the 200
                            stop.set()

        threads = [threading.Thread(target=sender, args=(k,)) for k in range(1, 5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert stop.is_set() and len(acked) == 20
    stored = spans_stored(Store(store_url))
    missing = [s for batch in acked for s in batch if s not in stored]
    assert missing == [], f"{len(missing)} acknowledged spans lost"


@pytest.mark.sqlite_only("holds SQLite's write lock from the test to make the store slower than the receiver")
def test_a_store_that_cannot_keep_up_gets_503_then_429_and_what_is_sent_again_is_stored_once(store_url, tmp_path):
    store = Store(store_url)
    _, token = store.create_ingest_token("shop")
    first = traces_request([pb_span(7, i) for i in range(1, 11)])
    with ReceiverProcess(store_url, "--write-timeout", "1", "--max-pending", "1") as r:
        blocker = sqlite3.connect(store_url.removeprefix("sqlite:///"), timeout=30)
        blocker.execute("BEGIN IMMEDIATE")  # the store's write lock, held: writes wait (readers go on, WAL)
        try:
            status, headers, body = r.post("/v1/traces", first, token)
            assert status == 503 and headers["retry-after"] == "2", body
            assert r.health()["pending_writes"] == 1  # the write still waits for the lock
            status, headers, _ = r.post("/v1/traces", traces_request([pb_span(8, 1)]), token)
            assert status == 429 and headers["retry-after"] == "2"
        finally:
            blocker.rollback()
            blocker.close()
        wait_until(lambda: r.health()["pending_writes"] == 0, what="the held write ends", timeout=60)
        status, _, _ = r.post("/v1/traces", first, token)  # the sender's retry
        assert status == 200
    assert spans_stored(store) == {(f"{7:032x}", f"{i:016x}") for i in range(1, 11)}  # once each
    assert store.trace_counts("shop")["spans"] == 10


def test_spans_of_one_trace_sent_to_three_receivers_on_one_postgresql_store_make_one_trace(postgres):
    """Three receivers behind a load balancer, one team store: each trace's root and two children reach three
    different receivers, at once; each trace is one trace of its three spans, mapped once all have come."""
    url = postgres.new_database()
    store = Store(url)
    _, token = store.create_ingest_token("shop")
    store.ensure_monitor_project("shop", quiet_seconds=3600)  # held open until every span is in
    traces = range(1, 31)
    with ThreadPoolExecutor(3) as pool:  # started together
        receivers = list(pool.map(lambda _: ReceiverProcess(url, "--assemble-every", "0.2"), range(3)))
    with receivers[0] as a, receivers[1] as b, receivers[2] as c:
        def send(r: ReceiverProcess, part: int) -> None:
            for t in traces:  # receiver k gets span k of every trace (the root's on a different one each time)
                span = pb_span(t, (t + part) % 3 + 1, parent=0 if (t + part) % 3 == 0 else 1)
                assert r.post("/v1/traces", traces_request([span]), token)[0] == 200

        threads = [threading.Thread(target=send, args=(r, k)) for k, r in enumerate((a, b, c))]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=120)
        assert store.trace_counts("shop") == {"traces": 30, "open": 30, "mapped": 0, "no_content": 0, "no_root": 0,
                                              "late": 0, "spans": 90}
        store.ensure_monitor_project("shop", quiet_seconds=0)
        wait_until(lambda: store.trace_counts("shop")["mapped"] == 30, what="every trace mapped", timeout=120)
    counts = store.trace_counts("shop")
    del counts["no_content"]  # (the mapping's to say: these spans carry no content)
    assert counts == {"traces": 30, "open": 0, "mapped": 30, "no_root": 0, "late": 0, "spans": 90}
    assert sorted(t["trace_id"] for t in store.iter_mapped_traces("shop")) == [f"{t:032x}" for t in traces]
    assert all(t["completeness"] == "complete" for t in store.iter_mapped_traces("shop"))


def test_bodies_over_what_the_receiver_holds_at_once_get_429_before_they_are_read(store_url):
    """A sender stalled half-way through a 600 KB body holds its share of --max-inflight-mb 1: a second 600 KB
    request is refused at the door (429, Retry-After) while it lasts, and taken once it has ended."""
    store = Store(store_url)
    _, token = store.create_ingest_token("shop")
    big = traces_request([pb_span(9, 1, attributes={"note": "x" * 600_000})])
    other = traces_request([pb_span(9, 2, parent=1, attributes={"note": "y" * 600_000})])
    with ReceiverProcess(store_url, "--max-inflight-mb", "1", "--max-body-mb", "1") as r:
        stalled = socket.create_connection(("127.0.0.1", r.port), timeout=60)
        stalled.sendall(f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                        f"Authorization: Bearer {token}\r\nContent-Length: {len(big)}\r\n\r\n".encode() + big[:1000])
        wait_until(lambda: r.health()["inflight_bytes"] == len(big), what="the stalled body counted", timeout=60)
        status, headers, body = r.post("/v1/traces", other, token)
        assert status == 429 and headers["retry-after"] == "2", body
        stalled.sendall(big[1000:])
        reply = stalled.recv(65536)
        assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
        stalled.close()
        wait_until(lambda: r.health()["inflight_bytes"] == 0, what="the body let go", timeout=60)
        assert r.post("/v1/traces", other, token)[0] == 200
    assert spans_stored(store) == {(f"{9:032x}", f"{1:016x}"), (f"{9:032x}", f"{2:016x}")}
