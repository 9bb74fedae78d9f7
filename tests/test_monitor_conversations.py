"""Conversations judged as conversations (evaluators/monitor/conversations.py), on either store, the clock given:
the traces sharing a gen_ai.conversation.id become one row after the conversation's quiet period, its turns in the
order the traces started (whatever order they came in), redacted with the tokens the conversation shares; a rule
decides and judges that row as it does a trace; a turn that comes after is kept, marked late, and left out."""
from __future__ import annotations

import datetime as dt
import hashlib
import json

import pytest
import sqlalchemy as sa

from evaluators.cli.monitor_rounds import RuleEngine
from evaluators.monitor import otlp
from evaluators.monitor.assemble import assemble_once
from evaluators.monitor.redact import set_project
from evaluators.monitor.claims import judge_pending
from evaluators.monitor.rules import decide, sample_point
from evaluators.monitor.serve import export_traces
from evaluators.store.schema import utcnow
from tests.judge_server import expected_score, prompt_text
from tests.monitor_procs import pb_span, traces_request

pytestmark = pytest.mark.both_stores
T0 = 1_764_320_000_000_000_000  # 2025-11-28T08:53:20Z


def receive(store, spans) -> None:
    got, refused = otlp.decode_traces(traces_request(spans), otlp.PROTOBUF)
    assert refused == []
    store.receive_telemetry("shop", got)


def turn(trace: int, at_s: int, question: str, answer: str, conversation: str | None, docs=None):
    said = json.dumps([{"role": "user", "parts": [{"type": "text", "content": question}]}])
    got = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": answer}]}])
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.input.messages": said,
             "gen_ai.output.messages": got, "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5}
    if conversation:
        attrs["gen_ai.conversation.id"] = conversation
    spans = [pb_span(trace, 1, name="chat gpt-4o", start=T0 + at_s * 10**9, attributes=attrs)]
    if docs:
        spans.append(pb_span(trace, 2, parent=1, name="retrieve", start=T0 + at_s * 10**9 + 1, attributes={
            "openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.id": "d1",
            "retrieval.documents.0.document.content": docs}))
    return spans


def _ids(rate: float) -> tuple[list[int], str, str]:
    """Trace numbers the rule at ``rate`` samples out, a conversation key whose row it samples in and one whose row
    it samples out: so the rule judges the one conversation's row and nothing else (sampling is the trace id's)."""
    from evaluators.store.monitor_conversations import conversation_id

    out = [n for n in range(1, 400) if sample_point(f"{n:032x}") >= rate][:6]
    keys = [f"conv-{k}" for k in range(400)]
    judged = next(k for k in keys if sample_point(conversation_id("shop", k)) < rate)
    other = next(k for k in keys if sample_point(conversation_id("shop", k)) >= rate)
    return out, judged, other


def test_a_conversation_s_traces_become_one_row_judged_by_a_rule_and_a_late_turn_is_kept_apart(store, judge_server,
                                                                                              tmp_path):
    store.ensure_monitor_project("shop", quiet_seconds=0)
    set_project(store, "shop", ["email", "phone"], None, conversation_quiet_seconds=300)
    (a, b, c, d, e, late), key, other = _ids(0.5)
    # sent out of order (the second turn first), and in no trace-id order (c < a < b by start); one turn answered
    # from a document
    receive(store, turn(a, 20, "And my number is +44 20 7946 0958", "Noted, +44 20 7946 0958.", key,
                        docs="Numbers are kept for 30 days."))
    receive(store, turn(c, 10, "Hi, I am jane@example.com", "Hello jane@example.com", key))
    receive(store, turn(b, 30, "Mail bob@example.org too", "Done: jane@example.com and bob@example.org", key))
    receive(store, turn(d, 15, "Another chat", "Another answer", other))
    receive(store, turn(e, 16, "No conversation here", "Fine", None))
    now = utcnow()
    assert assemble_once(store, now + dt.timedelta(seconds=1)) == 5  # the traces; their conversations wait
    assert store.trace_counts("shop")["mapped"] == 5 and "conversations" not in store.trace_counts("shop")
    assert assemble_once(store, now + dt.timedelta(seconds=200)) == 0
    assert assemble_once(store, utcnow() + dt.timedelta(seconds=301)) == 2  # both conversations' quiet passed

    cid = hashlib.sha256(f"conversation\0shop\0{key}".encode()).hexdigest()[:32]
    rows = {r["trace_id"]: r for r in store.iter_mapped_traces("shop")}
    row = rows[cid]
    assert (row["kind"], row["conversation_key"], row["completeness"], row["content"]) == (
        "conversation", key, "complete", True)
    assert row["fields"]["conversation"] == [
        {"role": "user", "content": "Hi, I am [EMAIL_1]"},
        {"role": "assistant", "content": "Hello [EMAIL_1]"},
        {"role": "user", "content": "And my number is [PHONE_1]"},
        {"role": "assistant", "content": "Noted, [PHONE_1].",
         "context": [{"id": "d1", "content": "Numbers are kept for 30 days."}]},
        {"role": "user", "content": "Mail [EMAIL_2] too"},
        {"role": "assistant", "content": "Done: [EMAIL_1] and [EMAIL_2]"}]
    assert {k: row["fields"][k] for k in ("query", "response", "input_tokens", "output_tokens", "turns",
                                          "conversation_id", "model")} == {
        "query": "Mail [EMAIL_2] too", "response": "Done: [EMAIL_1] and [EMAIL_2]", "input_tokens": 30,
        "output_tokens": 15, "turns": 3, "conversation_id": key, "model": "gpt-4o"}
    with store.engine.connect() as conn:
        made = dict(conn.execute(sa.text("SELECT trace_id, in_conversation FROM monitor_traces WHERE kind = 'trace'"
                                         " AND project = 'shop'")).all())
    other_cid = hashlib.sha256(f"conversation\0shop\0{other}".encode()).hexdigest()[:32]
    assert made == {f"{a:032x}": cid, f"{b:032x}": cid, f"{c:032x}": cid, f"{e:032x}": None, f"{d:032x}": other_cid}

    receive(store, turn(late, 40, "One more: carol@example.net", "Sure", key))  # after the row was made
    assert assemble_once(store, utcnow() + dt.timedelta(seconds=1)) == 1  # mapped as a trace
    assemble_once(store, utcnow() + dt.timedelta(days=1))  # its conversation is not made again
    counts = store.trace_counts("shop")
    assert (counts["traces"], counts["mapped"], counts["conversations"], counts["late_turns"]) == (6, 6, 2, 1)
    rows = {r["trace_id"]: r for r in store.iter_mapped_traces("shop")}
    assert rows[f"{late:032x}"]["late"] is True and rows[cid]["fields"]["turns"] == 3
    assert rows[f"{late:032x}"]["fields"]["query"] == "One more: [EMAIL_3]"  # the conversation's next token
    export_traces(store, "shop", tmp_path)
    lines = {x["trace_id"]: x for x in map(json.loads, (tmp_path / "traces.jsonl").read_text().splitlines())}
    assert {t: (x.get("kind"), x.get("late_turn")) for t, x in lines.items()} == {
        cid: ("conversation", None), other_cid: ("conversation", None), f"{late:032x}": ("trace", True),
        **{f"{n:032x}": (None, None) for n in (a, b, c, d, e)}}
    assert lines[cid]["conversation"] == rows[cid]["fields"]["conversation"]

    store.add_monitor_rule("shop", "talk", ["coherence"], 0.5, {"model": "judge-a", "base_url": judge_server.url,
                                                                "provider": "compatible"})
    rule = store.monitor_rule("shop", "talk")
    assert decide(store, "shop", rule, since_ns=0) == 8  # 6 traces and 2 conversations, each a decision
    decided = store.decisions("shop", "talk", 1)
    assert {t for t, x in decided.items() if x["decision"] == "pending"} == {cid}
    assert judge_pending(store, "shop", rule, RuleEngine(store)) == {"judged": 1, "failed": 0, "over_budget": 0}
    prompts = [prompt_text(call) for call in judge_server.calls]
    # one judgment a turn of the conversation, each seeing its answer; no address or number anywhere
    assert sorted(next(i for i, ans in enumerate(("Hello [EMAIL_1]", "Noted, [PHONE_1].",
                                                  "Done: [EMAIL_1] and [EMAIL_2]")) if ans in p) for p in prompts) == [0, 1, 2]
    assert not any(x in p for p in prompts for x in ("jane@", "bob@", "7946"))
    with store.engine.connect() as conn:
        values = conn.execute(sa.text("SELECT turn, value FROM results WHERE run_id = :r ORDER BY turn"),
                              {"r": store.decisions("shop", "talk", 1)[cid]["run_id"]}).all()
    by_answer = {next(ans for ans in ("Hello [EMAIL_1]", "Noted, [PHONE_1].", "Done: [EMAIL_1] and [EMAIL_2]")
                      if ans in p): expected_score(p) for p in prompts}
    assert [v for _, v in values if v is not None][:3] == [by_answer["Hello [EMAIL_1]"], by_answer["Noted, [PHONE_1]."],
                                                         by_answer["Done: [EMAIL_1] and [EMAIL_2]"]]

    _a_rule_judges_both_shapes_in_one_round(store, judge_server)


def _a_rule_judges_both_shapes_in_one_round(store, judge_server):
    """A rule judging every row: the two conversations' rows and the six traces' are judged in one round (two
    runs: the engine takes one shape a dataset; mixed, it refused the whole round and every trace failed)."""
    store.add_monitor_rule("shop", "all", ["coherence"], 1.0, {"model": "judge-a", "base_url": judge_server.url,
                                                               "provider": "compatible"})
    every = store.monitor_rule("shop", "all")
    assert decide(store, "shop", every, since_ns=0) == 8
    assert judge_pending(store, "shop", every, RuleEngine(store)) == {"judged": 8, "failed": 0, "over_budget": 0}
