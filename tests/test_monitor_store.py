"""Monitoring's tables (evaluators/store/traces.py) on SQLite and PostgreSQL: ingest tokens kept only as hashes
and revocable; spans and log records stored once however often they are sent; a trace mapped only if no span of
it came since it was read, and spans after that kept and marked late."""
from __future__ import annotations

import datetime as dt
import hashlib
import json

import pytest
import sqlalchemy as sa

pytestmark = pytest.mark.both_stores

T1, T2 = "0af7651916cd43dd8448eb211c80319c", "5b8efff798038103d269b633813fc60c"


def span(trace, sid, parent="", start=1_000, end=2_000, name="chat m"):
    return {"trace_id": trace, "span_id": sid, "parent_span_id": parent, "name": name, "kind": 3, "start_ns": start,
            "end_ns": end, "status_code": 0, "status_message": "", "attributes": {"gen_ai.request.model": "m"},
            "events": [], "resource": {"service.name": "app"}, "scope": {"name": "s", "version": "1"}}


def log(trace, body):
    return {"trace_id": trace, "span_id": "b7ad6b7169203331", "time_ns": 1_500, "event_name": "gen_ai.choice",
            "body": body, "attributes": {}, "resource": {}, "scope": {"name": "s", "version": ""}, "severity": 9}


def every_text(store) -> str:
    """Every value of every monitoring table, as text (raw SQL, not the code under test)."""
    out = []
    with store.engine.connect() as c:
        for t in ("monitor_projects", "monitor_tokens", "monitor_traces", "monitor_spans", "monitor_logs"):
            out += [str(v) for row in c.execute(sa.text(f"SELECT * FROM {t}")) for v in row]
    return " ".join(out)


def test_tokens_are_kept_hashed_name_their_project_and_stop_working_when_revoked(store):
    tid, token = store.create_ingest_token("shop")
    other_id, other = store.create_ingest_token("bank")
    assert token.startswith("evm_") and len(token) > 40 and token != other
    assert store.token_project(token) == "shop" and store.token_project(other) == "bank"
    assert store.token_project(token + "x") is None and store.token_project("") is None
    text = every_text(store)
    assert token not in text and other not in text  # only hashes
    assert hashlib.sha256(token.encode()).hexdigest() in text
    assert store.revoke_ingest_token(token)["project"] == "shop"  # by the token itself
    assert store.token_project(token) is None and store.token_project(other) == "bank"
    assert store.revoke_ingest_token(other_id)["id"] == other_id  # or by its id
    assert store.token_project(other) is None
    assert store.revoke_ingest_token("evm_unknown") is None
    assert [(t["id"], t["revoked_at"] is not None) for t in store.ingest_tokens("shop")] == [(tid, True)]
    assert store.monitor_project("shop")["quiet_seconds"] == 30.0


def test_a_batch_sent_twice_is_stored_once_and_late_spans_are_kept_and_marked(store):
    store.ensure_monitor_project("shop")
    batch = [span(T1, "a" * 16, start=1_000, end=9_000), span(T1, "b" * 16, "a" * 16, start=2_000),
             span(T2, "c" * 16, "d" * 16, start=500)]  # T2's root has not come
    logs = [log(T1, {"content": "hi"})]
    store.receive_telemetry("shop", batch, logs)
    store.receive_telemetry("shop", batch, logs)  # the sender's retry after a lost reply
    assert store.trace_counts("shop") == {"traces": 2, "open": 2, "mapped": 0, "no_content": 0, "no_root": 0,
                                          "late": 0, "spans": 3}
    spans, got_logs = store.trace_parts("shop", T1)
    assert [s["span_id"] for s in spans] == ["a" * 16, "b" * 16] and spans[0] == batch[0]
    assert got_logs == logs
    far = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) + dt.timedelta(hours=1)
    due = store.due_traces("shop", quiet_before=far, give_up_before=far - dt.timedelta(days=1))
    assert due == [{"trace_id": T1, "receipts": 2, "root_ended": True}]  # T2 has no ended root
    kw = dict(fields={"query": "q"}, sources={"query": "x"}, content=True, hint="", conversation_key=None,
              completeness="complete")
    store.receive_telemetry("shop", [span(T1, "e" * 16, "a" * 16, start=3_000)])  # came after the read
    assert not store.save_mapped_trace("shop", T1, 2, **kw)  # so the read is stale: not mapped
    assert store.save_mapped_trace("shop", T1, 3, **kw)
    assert not store.save_mapped_trace("shop", T1, 3, **kw)  # once
    store.receive_telemetry("shop", [span(T1, "f" * 16, "a" * 16, start=4_000)], [log(T1, {"content": "late"})])
    counts = store.trace_counts("shop")
    assert (counts["mapped"], counts["open"], counts["late"], counts["spans"]) == (1, 1, 1, 5)
    with store.engine.connect() as c:
        late = c.execute(sa.text("SELECT span_id FROM monitor_spans WHERE late ORDER BY span_id")).scalars().all()
        late_logs = c.execute(sa.text("SELECT COUNT(*) FROM monitor_logs WHERE late")).scalar()
    assert late == ["f" * 16] and late_logs == 1
    rows = list(store.iter_mapped_traces("shop"))
    assert [(r["trace_id"], r["start_ns"], r["fields"]) for r in rows] == [(T1, 1_000, {"query": "q"})]
    assert list(store.iter_mapped_traces("shop", since_ns=1_001)) == []
    assert store.trace_counts("bank")["traces"] == 0  # projects apart


def big_requests():
    """Three requests of >= pgfast.COPY_FROM spans and log records each (so the COPY path on PostgreSQL): 40
    traces of a root and 3 children, 10 spans repeated with other names in the same request, records repeated;
    the first request sent twice; then, after trace 0 is mapped, a new child of each trace and 30 spans again
    (renamed). Returns (requests, the spans expected: first copy of each key, the log records expected)."""
    traces = [f"{t + 1:032x}" for t in range(40)]
    first = [span(tr, f"{t * 8 + k + 1:016x}", "" if k == 0 else f"{t * 8 + 1:016x}", start=1_000 + k, name=f"s{k}")
             for t, tr in enumerate(traces) for k in range(4)]
    first += [dict(sp, name="repeated in its request") for sp in first[5:15]]
    logs = [log(tr, {"content": f"{tr} {k}"}) for tr in traces for k in range(2)]
    logs += logs[:5]
    later = [span(tr, f"{t * 8 + 5:016x}", f"{t * 8 + 1:016x}", start=5_000, name="later") for t, tr in
             enumerate(traces)]
    later += [dict(sp, name="sent again later") for sp in first[100:130]]
    later_logs = [log(tr, {"content": f"{tr} later"}) for tr in traces] + logs[20:50]
    expected = {(sp["trace_id"], sp["span_id"]): sp for sp in first[:160] + later[:40]}
    expected_logs = {json.dumps(lg, sort_keys=True) for lg in logs + later_logs}
    return [(first, logs), (first, logs), (later, later_logs)], traces, expected, expected_logs


def receive_big_requests(store) -> None:
    requests, traces, _, _ = big_requests()
    store.ensure_monitor_project("shop")
    for k, (spans, logs) in enumerate(requests):
        if k == 2:
            assert store.save_mapped_trace("shop", traces[0], 2, fields={"query": "q"}, sources={}, content=True,
                                           hint="", conversation_key=None, completeness="complete")
        store.receive_telemetry("shop", [dict(sp) for sp in spans], [dict(lg) for lg in logs])


def test_big_requests_with_repeats_keep_each_span_and_record_once_as_first_sent(store):
    """On PostgreSQL these requests go through COPY and a staging table (pgfast.copy_insert_new)."""
    from evaluators.store import pgfast

    requests, traces, expected, expected_logs = big_requests()
    assert all(len(spans) >= pgfast.COPY_FROM and len(logs) >= pgfast.COPY_FROM for spans, logs in requests)
    receive_big_requests(store)
    with store.engine.connect() as c:
        spans = c.execute(sa.text("SELECT trace_id, span_id, parent_span_id, name, start_ns, end_ns, data, late "
                                  "FROM monitor_spans WHERE project = 'shop'")).all()
        logs = c.execute(sa.text("SELECT trace_id, data, late FROM monitor_logs WHERE project = 'shop'")).all()
        receipts = dict(c.execute(sa.text("SELECT trace_id, receipts FROM monitor_traces")).all())
    got = {(r.trace_id, r.span_id): r for r in spans}
    assert len(spans) == len(expected) == 200 and set(got) == set(expected)
    for key, sp in expected.items():
        r = got[key]
        assert (r.parent_span_id, r.name, r.start_ns, r.end_ns, as_dict(r.data)) == (
            sp["parent_span_id"], sp["name"], sp["start_ns"], sp["end_ns"], sp), key
    assert {k for k, r in got.items() if r.late} == {(traces[0], f"{5:016x}")}  # trace 0's span after its mapping
    assert len(logs) == len(expected_logs) == 120
    assert {json.dumps(as_dict(r.data), sort_keys=True) for r in logs} == expected_logs
    assert [as_dict(r.data)["body"]["content"] for r in logs if r.late] == [f"{traces[0]} later"]
    assert receipts == {tr: 3 for tr in traces}


def as_dict(value) -> dict:
    """A JSON column's value as read by raw SQL: parsed by psycopg, text from sqlite3."""
    return value if isinstance(value, dict) else json.loads(value)


def stored_rows(url: str) -> dict[str, list[tuple]]:
    """Every monitoring row of a PostgreSQL store but its arrival times, JSON as its stored text (raw SQL)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as c:
            return {
                "spans": c.execute(sa.text("SELECT project, trace_id, span_id, parent_span_id, name, start_ns, end_ns, "
                                           "data::text, late FROM monitor_spans ORDER BY 1, 2, 3")).all(),
                "logs": c.execute(sa.text("SELECT project, trace_id, digest, time_ns, data::text, late FROM "
                                          "monitor_logs ORDER BY 1, 2, 3")).all(),
                "traces": c.execute(sa.text("SELECT project, trace_id, receipts, root_ended, start_ns, status FROM "
                                            "monitor_traces ORDER BY 1, 2")).all()}
    finally:
        engine.dispose()


def test_copy_stores_on_postgresql_exactly_what_the_plain_insert_stores(postgres, monkeypatch):
    """The same requests (repeats in a request, a request sent twice, spans after a mapping) into two
    databases: through COPY (pgfast.COPY_FROM as shipped) and through the plain INSERT (the threshold raised)."""
    from evaluators.store import pgfast
    from evaluators.store.store import Store

    copied, plain = postgres.new_database(), postgres.new_database()
    receive_big_requests(Store(copied))
    monkeypatch.setattr(pgfast, "COPY_FROM", 10**9)
    receive_big_requests(Store(plain))
    got, want = stored_rows(copied), stored_rows(plain)
    assert (len(want["spans"]), len(want["logs"]), len(want["traces"])) == (200, 120, 40)
    assert got == want
