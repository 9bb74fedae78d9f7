"""Monitoring's tables (evaluators/store/traces.py) on SQLite and PostgreSQL: ingest tokens kept only as hashes
and revocable; spans and log records stored once however often they are sent; a trace mapped only if no span of
it came since it was read, and spans after that kept and marked late."""
from __future__ import annotations

import datetime as dt
import hashlib

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
