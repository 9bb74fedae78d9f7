"""Redaction of mapped traces (evaluators/monitor/redact.py): what is found in real-looking text and what is left
as written (versions, dates, times, IPs, ISBNs, ids, order numbers), tokens stable through a trace and a
conversation, originals kept apart only where the project allows it, patterns refused at set time by name."""
from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from evaluators.core.errors import UsageError
from evaluators.monitor.redact import Settings, find, luhn_ok, redact_row, set_project

ALL = Settings(("email", "phone", "card"), {"ORDER": r"ORD-[0-9]{6,}"}, False, "k")

# (text, the values found in it as (value, label)): written by hand
FOUND = [
    ("Call me at +1 (415) 555-2671 or 415.555.2671, or (212) 555-0199.",
     [("+1 (415) 555-2671", "PHONE"), ("415.555.2671", "PHONE"), ("(212) 555-0199", "PHONE")]),
    ("UK office +44 20 7946 0958, London 020 7946 0958; Paris +33 1 23 45 67 89 / 01 23 45 67 89",
     [("+44 20 7946 0958", "PHONE"), ("020 7946 0958", "PHONE"), ("+33 1 23 45 67 89", "PHONE"),
      ("01 23 45 67 89", "PHONE")]),
    ("tel: 06 12 34 56 78, Berlin 030 1234567, +4930123456", [("06 12 34 56 78", "PHONE"), ("030 1234567", "PHONE"),
                                                             ("+4930123456", "PHONE")]),
    ("Mail Jane.Doe+shop@example.co.uk or BOB@mail.example.com now.",
     [("Jane.Doe+shop@example.co.uk", "EMAIL"), ("BOB@mail.example.com", "EMAIL")]),
    ("card 4111 1111 1111 1111, amex 3782 822463 10005, plain 5555555555554444, mc 2223-0031-2200-3222 thanks",
     [("4111 1111 1111 1111", "CARD"), ("3782 822463 10005", "CARD"), ("5555555555554444", "CARD"),
      ("2223-0031-2200-3222", "CARD")]),
    ("your order ORD-20261128 ships to jane@example.com", [("ORD-20261128", "ORDER"), ("jane@example.com", "EMAIL")]),
    # left as written: each of these is what a trace holds beside the values above
    ("version 1.2.3, v10.0.19045.3803, released 2024-06-01 at 10:30:00, on 28/11/2026, 28.11.2026", []),
    ("order #4481-2291-77, ip 192.168.1.254, build 20261128.1, pip install foo==2.31.0, ORD-123", []),
    ("ISBN 978-3-16-148410-0, uuid 123e4567-e89b-12d3-a456-426614174000, trace 4bf92f3577b34da6a3ce929d0e0e4736", []),
    ("ticket 1234567890, amount $1,234,567.89, at 48.8566, 2.3522, epoch 1732780800000, 2+12345678=x", []),
    ("order id 1234 5678 9012 3452 (Luhn-valid, no card network), 4111 1111 1111 1112 (Luhn fails)", []),
    ("ts 2026112812345675 (a Luhn-valid 16-digit timestamp), id 100-200-3000, 123-456-7890", []),
    ("@username said icon@2x.png and pkg@1.2.3 and user@localhost and a @decorator", []),
    ('at 2026-11-28T04:33:34.123456Z, {"tool_call_id": "call_4111111111111111"}, SKU 0-12345-67890-5, '
     "span 00f067aa0ba902b7, open 0800 to 1700", []),
    ("call 0800 123 4567 or 07700 900123", [("0800 123 4567", "PHONE"), ("07700 900123", "PHONE")]),
]


@pytest.mark.parametrize("text,expected", FOUND, ids=[t[:30] for t, _ in FOUND])
def test_values_are_found_in_real_looking_text_and_nothing_else(text, expected):
    assert [(text[s:e], label) for s, e, label in find(text, ALL)] == expected


def test_luhn_and_the_fixtures_luhn_values():
    assert luhn_ok("4111111111111111") and luhn_ok("1234567890123452") and luhn_ok("2026112812345675")
    assert not luhn_ok("4111111111111112") and not luhn_ok("1234567890123456")


def test_only_the_kinds_asked_for_are_redacted():
    text = "jane@example.com, +44 20 7946 0958, 4111 1111 1111 1111"
    assert [label for *_, label in find(text, Settings(("email",), {}, False, "k"))] == ["EMAIL"]
    assert find(text, Settings((), {}, False, "k")) == []


def _row(fields, key=None):
    return {"fields": fields, "sources": {"query": "x"}, "content": True, "hint": "", "conversation_key": key}


@pytest.mark.both_stores
def test_tokens_are_stable_through_a_trace_and_its_conversation_and_originals_are_kept_only_when_allowed(store):
    store.ensure_monitor_project("shop")
    row = _row({"query": "I am jane@example.com, call +1 415 555 2671", "response": "Hi jane@example.com!"})
    assert redact_row(store, "shop", "t1", row) is row  # nothing set: unchanged
    set_project(store, "shop", ["email", "phone", "card"], {"ORDER": "ORD-[0-9]+"})
    first = redact_row(store, "shop", "a" * 32, _row({
        "query": "I am Jane@Example.com, card 4111-1111-1111-1111, order ORD-77",
        "response": "Thanks jane@example.com; we will write to bob@example.org",
        "conversation": [{"role": "user", "content": "mail bob@example.org"}], "input_tokens": 12,
        "tool_calls": [{"name": "lookup", "arguments": {"email": "jane@example.com"}, "tool_result": "+1 415 555 2671"}],
        "conversation_id": "c-1"}, key="c-1"))
    assert first["fields"] == {
        "query": "I am [EMAIL_1], card [CARD_1], order [ORDER_1]",
        "response": "Thanks [EMAIL_1]; we will write to [EMAIL_2]",
        "conversation": [{"role": "user", "content": "mail [EMAIL_2]"}], "input_tokens": 12,
        "tool_calls": [{"name": "lookup", "arguments": {"email": "[EMAIL_1]"}, "tool_result": "[PHONE_1]"}],
        "conversation_id": "c-1"}
    assert first["conversation_key"] == "c-1" and first["sources"] == {"query": "x"}
    # the conversation's next trace: the same values, the same tokens; a new one, the next number
    second = redact_row(store, "shop", "b" * 32, _row({"query": "bob@example.org here, and carol@example.net",
                                                        "response": "ok +1 (415) 555-2671"}, key="c-1"))
    assert second["fields"] == {"query": "[EMAIL_2] here, and [EMAIL_3]", "response": "ok [PHONE_1]"}
    # another trace with no conversation: its own numbering
    alone = redact_row(store, "shop", "c" * 32, _row({"query": "carol@example.net", "response": "jane@example.com"}))
    assert alone["fields"] == {"query": "[EMAIL_1]", "response": "[EMAIL_2]"}
    with store.engine.connect() as c:
        kept = c.execute(sa.text("SELECT count(*) FROM monitor_redactions WHERE original IS NOT NULL")).scalar()
    assert kept == 0
    with pytest.raises(UsageError, match="does not keep"):
        store.redaction_originals("shop", "t:" + "c" * 32)

    set_project(store, "shop", keep_original=True)
    redact_row(store, "shop", "d" * 32, _row({"query": "dave@example.com, 4111 1111 1111 1111", "response": "x"}))
    assert store.redaction_originals("shop", "t:" + "d" * 32) == {"[EMAIL_1]": "dave@example.com",
                                                                  "[CARD_1]": "4111 1111 1111 1111"}
    set_project(store, "shop", keep_original=False)  # turned off: those kept are gone
    with store.engine.connect() as c:
        assert c.execute(sa.text("SELECT count(*) FROM monitor_redactions WHERE original IS NOT NULL")).scalar() == 0


@pytest.mark.both_stores
def test_a_conversation_key_holding_an_address_still_groups_but_is_not_kept(store):
    store.ensure_monitor_project("shop")
    set_project(store, "shop", ["email"], {})
    a = redact_row(store, "shop", "a" * 32, _row({"query": "hi", "response": "yo", "conversation_id": "jane@x.org"},
                                                 key="jane@x.org"))
    b = redact_row(store, "shop", "b" * 32, _row({"query": "hi", "response": "yo"}, key="jane@x.org"))
    assert a["conversation_key"] == b["conversation_key"] and a["conversation_key"].startswith("redacted:")
    assert "jane" not in a["conversation_key"] and a["fields"]["conversation_id"] == "[EMAIL_1]"


@pytest.mark.parametrize("option,says", [
    (["ORDER=(a|b"], "--redact-pattern ORDER: the pattern '(a|b' is not a regular expression"),
    (["ORDER=(?=x)y"], "--redact-pattern ORDER: the pattern '(?=x)y' is not a regular expression"),
    (["ORDER=(\\w+)\\1"], "--redact-pattern ORDER"),
    (["ORDER=x*"], "--redact-pattern ORDER: the pattern 'x*' matches an empty text"),
    (["ORDER=\\b"], "matches an empty text"),
    (["ALL=[\\s\\S]+"], "--redact-pattern ALL: the pattern '[\\\\s\\\\S]+' matches the whole of an ordinary sentence"),
    (["BIG=((((a{100}){100}){100}){100})"], "--redact-pattern BIG: the pattern"),
    (["order=x+"], "--redact-pattern 'order': a name is upper-case"),
    (["EMAIL=x+"], "--redact-pattern 'EMAIL'"),
    (["ORDER"], "give it as NAME=REGEX"),
    (["A=x+", "A=y+"], "'A' is given twice"),
])
def test_unsafe_or_invalid_patterns_are_refused_at_set_time_naming_the_pattern(store, option, says):
    from evaluators.monitor.redact import project_settings

    store.ensure_monitor_project("shop")
    with pytest.raises(UsageError) as e:
        project_settings(store, "shop", None, option, None, None)
    assert says in str(e.value)
    assert store.monitor_project("shop")["redact_patterns"] == {}  # nothing set


def test_the_cli_s_settings_are_said_and_none_turns_them_off(store):
    from evaluators.monitor.redact import project_settings

    store.ensure_monitor_project("shop")
    said = project_settings(store, "shop", "email,card", ["ORDER=ORD-[0-9]+", "TICKET=T#[0-9]{5}"], True, 120)
    assert said == ["project 'shop': quiet period 30 s, conversations' 120 s",
                    "  redacts: email, card; ORDER (ORD-[0-9]+); TICKET (T#[0-9]{5}); originals kept apart"]
    said = project_settings(store, "shop", None, None, None, None)  # nothing given: nothing changed
    assert said[1] == "  redacts: email, card; ORDER (ORD-[0-9]+); TICKET (T#[0-9]{5}); originals kept apart"
    assert project_settings(store, "shop", "none", ["none"], False, None)[1] == \
        "  redacts: nothing built in; originals not kept"
    assert find("a@b.org ORD-12", Settings(*[store.redaction_settings("shop")[k] for k in ("kinds", "patterns")])) == []


def test_an_unknown_kind_is_refused(store):
    store.ensure_monitor_project("shop")
    with pytest.raises(UsageError, match="--redact takes email, phone, card .*not ssn"):
        set_project(store, "shop", ["email", "ssn"], None)


def test_a_pattern_that_would_take_python_s_engine_years_takes_re2_milliseconds():
    """A backtracking pattern on a text made to defeat it: RE2's time is linear in the text."""
    s = Settings((), {"EVIL": r"(a|aa)+$"}, False, "k")
    text = "a" * 5000 + "!"
    t = time.process_time()
    assert find(text, s) == []
    assert time.process_time() - t < 1.0  # ~1 ms here; Python's re: exponential
    s = Settings(("email", "phone", "card"), {}, False, "k")
    blob = "x" * 200_000 + "@" + "1" * 200_000  # a long run the built-in patterns scan
    t = time.process_time()
    find(blob, s)
    assert time.process_time() - t < 2.0


PII = ("jane.doe@example.com", "4111 1111 1111 1111", "ORD-20261128", "(415) 555-2671", "555-2671")


def test_pii_sent_over_otlp_reaches_the_store_the_export_and_the_judge_as_tokens_only(store_url, judge_server,
                                                                                        tmp_path):
    """End to end: an OTLP span through the receiver process, the row it stores, `monitor export`'s traces.jsonl
    and what the loopback judge is sent by `monitor rule run` hold the tokens and none of the values."""
    import json
    import subprocess
    import sys

    from evaluators.store.store import Store
    from tests.conftest import ROOT, env_for_subprocess
    from tests.judge_server import prompt_text
    from tests.monitor_procs import ReceiverProcess, pb_span, traces_request
    from tests.procs import wait_until

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "evaluators", "monitor", *args, "--db", store_url], cwd=ROOT,
                              capture_output=True, text=True, env=env_for_subprocess(), timeout=300)

    store = Store(store_url)
    _, ingest = store.create_ingest_token("shop")
    bad = cli("project", "--project", "shop", "--redact", "email", "--redact-pattern", "ORDER=(ORD)-\\1")
    assert bad.returncode == 2 and "--redact-pattern ORDER: the pattern" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr and store.monitor_project("shop")["redact"] == []  # nothing set
    ok = cli("project", "--project", "shop", "--quiet-seconds", "0", "--redact", "email,phone,card",
             "--redact-pattern", "ORDER=ORD-[0-9]{4,}")
    assert ok.returncode == 0, ok.stderr
    assert "redacts: email, phone, card; ORDER (ORD-[0-9]{4,}); originals not kept" in ok.stdout
    assert cli("rule", "add", "--project", "shop", "--name", "all", "--metrics", "coherence", "--judge-base-url",
               judge_server.url).returncode == 0
    said = "I'm jane.doe@example.com, card 4111 1111 1111 1111, order ORD-20261128; call me on (415) 555-2671"
    got = "Thanks: jane.doe@example.com is on file and ORD-20261128 ships today (app 2.31.0, 2026-11-28)."
    span = pb_span(7, 1, name="chat gpt-4o", attributes={
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": said}]}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": got}]}])})
    with ReceiverProcess(store_url, "--assemble-every", "0.2") as r:
        assert r.post("/v1/traces", traces_request([span]), ingest)[0] == 200
        wait_until(lambda: store.trace_counts("shop")["mapped"] == 1, what="the trace mapped", timeout=60)
    query = "I'm [EMAIL_1], card [CARD_1], order [ORDER_1]; call me on [PHONE_1]"
    response = "Thanks: [EMAIL_1] is on file and [ORDER_1] ships today (app 2.31.0, 2026-11-28)."
    with store.engine.connect() as c:
        row = c.execute(sa.text("SELECT * FROM monitor_traces WHERE project = 'shop'")).mappings().one()
    fields = row["fields"] if isinstance(row["fields"], dict) else json.loads(row["fields"])
    assert (fields["query"], fields["response"]) == (query, response)
    assert not any(v in str(dict(row)) for v in PII)

    assert cli("export", "--project", "shop", "--out", str(tmp_path)).returncode == 0
    exported = (tmp_path / "traces.jsonl").read_text(encoding="utf-8")
    [line] = [json.loads(x) for x in exported.splitlines()]
    assert (line["query"], line["response"]) == (query, response) and not any(v in exported for v in PII)

    p = cli("rule", "run", "--project", "shop")
    assert p.returncode == 0, p.stderr
    assert store.decisions("shop", "all", 1)[f"{7:032x}"]["decision"] == "judged"
    [call] = judge_server.calls
    assert query in prompt_text(call) and response in prompt_text(call)
    assert not any(v in json.dumps(call, ensure_ascii=False) for v in PII)
