"""The Monitoring page (issue 31): a project and its ingest token made in the page (shown once, stored hashed, its
maker recorded), the snippet the docs' Monitoring page shows, the traffic counts, the trace list's filters and keyset pages, and a
trace opened with the answer to "why has this trace no score" for each rule. Every expected value is what the test
planted. (The browser walk, the snippet run for real against a receiver, is tests/test_monitor_page_browser.py.)"""
from __future__ import annotations

import hashlib
import re

import pytest

from tests.apptest import app, as_read, shown_text, st_testing
from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("fresh_caches")
PAGE = "pages/monitoring.py"
HINT = "set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY in the app"
REASON = "Coherent: it answers the refund question in order."
ERROR = "judge timed out after 60 s"


def _point(trace_id: str) -> float:
    """Where a trace falls in [0, 1) for sampling (the docs' rule: a SHA-256 of its hex id), computed here."""
    return int.from_bytes(hashlib.sha256(trace_id.encode()).digest()[:8], "big") / 2**64


def _span(tid: str, sid: str, name: str, parent: str = "", start: int = 1_000_000_000, ms: int = 1500,
          code: int = 0, message: str = "") -> dict:
    return {"trace_id": tid, "span_id": sid, "parent_span_id": parent, "name": name, "start_ns": start,
            "end_ns": start + ms * 1_000_000, "status_code": code, "status_message": message, "attributes": {}}


def plant(store, tmp_path, span_name: str = "chat gpt-4o") -> dict[str, str]:
    """Project ``shop``: five traces (arrived in this order) and a rule ``quality`` (coherence, 50%) with a decision
    for each mapped one: judged (score 4 and its reasoning in a run), failed, sampled out, no content; one trace
    open. Returns name -> trace id."""
    from evaluators import load_dataset
    from evaluators.store.schema import Result

    ids = {k: hashlib.md5(k.encode()).hexdigest() for k in ("judged", "failed", "sampled", "silent", "open")}
    store.ensure_monitor_project("shop")
    for k, tid in ids.items():
        spans = [_span(tid, "a" * 16, span_name)]
        if k == "judged":
            spans.append(_span(tid, "b" * 16, "execute_tool lookup_order", parent="a" * 16, ms=250, code=2,
                               message="order service unavailable"))
        store.receive_telemetry("shop", spans)
        if k == "open":
            continue
        content = k != "silent"
        fields = {"query": f"Where is my refund? ({k})", "response": f"Your refund was sent on Monday. ({k})",
                  "model": "gpt-4o"} if content else {"model": "gpt-4o"}
        sources = {f: f"gen_ai.{'input' if f == 'query' else 'output'}.messages of span `{span_name}`"
                   for f in fields}
        assert store.save_mapped_trace("shop", tid, 1, fields=fields, sources=sources, content=content,
                                       hint="" if content else HINT, conversation_key=None, completeness="complete")
    store.receive_telemetry("shop", [_span(ids["judged"], "c" * 16, "late span")])  # after mapping: late
    data = tmp_path / "rows.jsonl"
    data.write_text('{"query": "Where is my refund?", "response": "Your refund was sent on Monday."}\n')
    did = store.save_dataset(load_dataset(data))
    run_id = store.create_run(did, {"metrics": ["coherence"]}, "h", "monitor shop quality")
    store.write_results(run_id, [Result(row_idx=0, metric="coherence", turn=0, status="ok", value=4.0,
                                        outputs={"coherence": 4.0}, reason=REASON)])
    store.add_monitor_rule("shop", "quality", ["coherence"], 0.5, {"model": "loopback"})
    store.save_decisions("shop", "quality", 1, [
        {"trace_id": ids["judged"], "decision": "judged", "run_id": run_id, "row_idx": 0},
        {"trace_id": ids["failed"], "decision": "failed", "error": ERROR},
        {"trace_id": ids["sampled"], "decision": "sampled_out"},
        {"trace_id": ids["silent"], "decision": "no_content"}])
    return ids


def _listed(at) -> list[str]:
    frames = [d.value for d in at.dataframe if "trace" in d.value.columns]
    return list(frames[0]["trace"]) if frames else []


def test_the_readme_shows_the_page_s_snippet_and_environment():
    from ui.monitor import ENV, SNIPPET

    readme = (ROOT / "docs" / "monitoring.md").read_text(encoding="utf-8")  # the docs' Monitoring page
    assert f"```python\n{SNIPPET}\n```" in readme
    assert f"```bash\n{ENV.format(endpoint='http://127.0.0.1:4318', token='<token>')}\n```" in readme
    assert len(SNIPPET.splitlines()) == 5


def test_a_fresh_machine_makes_its_project_and_token_in_the_page_shown_once_stored_hashed(home_store, monkeypatch):
    from ui.auth import USER

    monkeypatch.setenv("EVAL_DASHBOARD_PASSWORD_SHA256", hashlib.sha256(b"pw").hexdigest())  # sign-in on
    at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state[USER] = "Ana"
    at = app(PAGE, at)
    assert "No project yet" in shown_text(at)
    assert all("evm_" not in c.value for c in at.code)
    at.text_input(key="monitor.new_project").input("shop").run()
    at.button(key="monitor.make_token").click().run()
    assert not at.exception and not at.error
    env = next(c.value for c in at.code if "OTEL_EXPORTER_OTLP_HEADERS" in c.value)
    token = re.search(r"Bearer%20(\S+?)\"", env).group(1)
    assert token.startswith("evm_") and len(token) > 40
    assert home_store.token_project(token) == "shop"  # the token the page showed is the project's
    [made] = home_store.ingest_tokens("shop")
    assert made["created_by"] == "Ana"
    with home_store.engine.connect() as c:  # only its SHA-256 is kept
        import sqlalchemy as sa

        stored = c.execute(sa.text("SELECT token_hash FROM monitor_tokens")).scalars().all()
    assert stored == [hashlib.sha256(token.encode()).hexdigest()]
    assert dict(at.query_params) == {"project": ["shop"]} or dict(at.query_params) == {"project": "shop"}
    assert "Instrument your app" in [e.label for e in at.expander]
    assert any(c.value.startswith("from opentelemetry import trace") for c in at.code)
    at.run()  # still shown on a rerun of this session...
    assert any(token in c.value for c in at.code)
    at.button(key="monitor.hide_token").click().run()  # ...until hidden: then never again
    assert all(token not in c.value for c in at.code)
    assert any("Bearer%20<token>" in c.value for c in at.code)
    assert token not in str(dict(at.query_params))


def test_a_link_naming_an_unknown_project_or_trace_says_not_found(home_store, tmp_path):
    at = app(PAGE, allow_errors=True, project="nope")
    assert "Project not found" in shown_text(at)
    ids = plant(home_store, tmp_path)
    at = app(PAGE, allow_errors=True, project="shop", trace="f" * 32)
    assert "Trace not found" in shown_text(at) and ids["judged"] in _listed(at)


def test_traffic_the_list_its_filters_and_why_each_trace_has_or_has_not_a_score(home_store, tmp_path):
    ids = plant(home_store, tmp_path)
    at = app(PAGE, project="shop")
    cards = {m.label: m.value for m in at.metric}
    assert {k: cards[k] for k in ("received", "open", "mapped", "no content", "no root", "late")} == \
        {"received": "5", "open": "1", "mapped": "4", "no content": "1", "no root": "0", "late": "1"}
    assert {k: cards[k] for k in ("judged", "failed", "sampled out", "no content", "pending")} == \
        {"judged": "1", "failed": "1", "sampled out": "1", "no content": "1", "pending": "0"}
    assert _listed(at) == [ids[k] for k in ("open", "silent", "sampled", "failed", "judged")]  # newest first
    at.selectbox(key="decision").select("quality: failed").run()
    assert _listed(at) == [ids["failed"]]
    at.selectbox(key="decision").select("any").run()
    at.selectbox(key="state").select("no_content").run()
    assert _listed(at) == [ids["silent"]]
    at.selectbox(key="state").select("late").run()
    assert _listed(at) == [ids["judged"]]
    at.selectbox(key="state").select("any").run()
    at.text_input(key="text").input("REFUND WAS SENT on monday. (sa").run()  # any case, a part of the response
    assert _listed(at) == [ids["sampled"]]

    expected = {
        "judged": ["quality (version 1): judged: its scores below", "coherence: 4 (ok)", REASON,
                   "response ← gen_ai.output.messages of span `chat gpt-4o`", "Your refund was sent on Monday. (judged)"],
        "failed": ["quality (version 1): failed: judging it raised the error below", ERROR],
        "sampled": [f"quality (version 1): sampled out: the rule judges 50% of traces, those whose trace-id hash is "
                    f"under 0.5; this one's is {_point(ids['sampled']):.3f}"],
        "silent": [f"quality (version 1): no content: the app captured nothing to judge. {HINT}"],
        "open": ["quality (version 1): not decided yet: the trace is still open", "No row yet (the trace is open)."]}
    assert _point(ids["sampled"]) >= 0.5  # planted as the rule would have decided
    for k, texts in expected.items():
        at = app(PAGE, project="shop", trace=ids[k])
        page = shown_text(at)
        for text in texts:
            assert text in page, (k, text)
    at = app(PAGE, project="shop", trace=ids["judged"])
    spans = next(c.value for c in at.code if "execute_tool" in c.value)
    assert spans.splitlines() == ["    1500.0 ms  unset     chat gpt-4o",
                                  "     250.0 ms  error: order service unavailable  execute_tool lookup_order",
                                  "    1500.0 ms  unset     late span  (late)"]


@pytest.mark.both_stores
def test_the_list_pages_by_key_and_a_rare_filter_looks_through_a_bounded_window(store, tmp_path, monkeypatch):
    from evaluators.read import monitor

    store.ensure_monitor_project("shop")
    ids = [hashlib.md5(f"t{i}".encode()).hexdigest() for i in range(23)]
    for i, tid in enumerate(ids):
        store.receive_telemetry("shop", [_span(tid, "a" * 16, "chat")])
        fields = {"query": f"q{i}", "response": "needle here" if i % 5 == 0 else "hay"}
        assert store.save_mapped_trace("shop", tid, 1, fields=fields, sources={}, content=True, hint="",
                                       conversation_key=None, completeness="complete")
    newest_first = ids[::-1]
    got, before = [], None
    while True:  # pages of 4: every trace once, newest first
        page = monitor.trace_page(store, "shop", before=before, limit=4)
        got += [r["trace_id"] for r in page["rows"]]
        assert page["looked_to"] is None
        if page["next"] is None:
            break
        before = page["next"]
    assert got == newest_first
    monkeypatch.setattr(monitor, "SCAN", 6)  # a filtered page looks through 6 traces at most
    f = monitor.TraceFilter(text="NEEDLE")
    got, before, pages = [], None, 0
    while True:
        page = monitor.trace_page(store, "shop", f, before=before, limit=4)
        pages += 1
        got += [r["trace_id"] for r in page["rows"]]
        assert len(page["rows"]) <= 2  # 6 traces hold 1 or 2 needles
        if page["next"] is None:
            break
        assert page["looked_to"] == page["next"]
        before = page["next"]
    assert got == [t for t in newest_first if ids.index(t) % 5 == 0] and pages == 4  # 23 traces: 6 + 6 + 6 + 5


@pytest.mark.both_stores
@pytest.mark.parametrize("rare", [True, False], ids=["read-from-the-index", "looked-up-trace-by-trace"])
def test_a_decision_filter_keeps_exactly_the_traces_so_decided_either_way_it_is_read(store, monkeypatch, rare):
    from evaluators.read import monitor

    store.ensure_monitor_project("shop")
    ids = [hashlib.md5(f"t{i}".encode()).hexdigest() for i in range(12)]
    for tid in ids:
        store.receive_telemetry("shop", [_span(tid, "a" * 16, "chat")])
    store.add_monitor_rule("shop", "quality", ["coherence"], 1.0, None)
    store.add_monitor_rule("shop", "quality", ["coherence", "fluency"], 1.0, None)  # version 2
    store.save_decisions("shop", "quality", 1, [{"trace_id": t, "decision": "failed"} for t in ids])  # older version
    store.save_decisions("shop", "quality", 2, [{"trace_id": t, "decision": "failed" if i % 3 == 0 else "judged"}
                                                for i, t in enumerate(ids)])
    monkeypatch.setattr(monitor, "RARE", 100 if rare else 0)
    page = monitor.trace_page(store, "shop", monitor.TraceFilter(rule="quality", rule_version=2, decision="failed"))
    assert [r["trace_id"] for r in page["rows"]] == [t for i, t in enumerate(ids) if i % 3 == 0][::-1]
    assert {r["decisions"]["quality"] for r in page["rows"]} == {"failed"}


def test_a_rule_is_added_and_changed_in_the_page_as_the_cli_checks_it(home_store):
    """The form stores what was typed (the judge without a key: only the variable's NAME); the same name with
    another rate is version 2; an unreadable filter and a budget with no price for the judge are refused, naming
    why, and store nothing."""
    home_store.ensure_monitor_project("shop")
    at = app(PAGE, project="shop")

    def save(**fields):
        for key, value in fields.items():
            widget = {"metrics": at.multiselect, "rate": at.slider, "cap": at.number_input,
                      "budget": at.number_input}.get(key, at.text_input)
            widget(key=f"monitor.rule.{key}").set_value(value)
        next(b for b in at.button if b.label == "Save the rule").click()
        at.run()

    save(name="quality", metrics=["coherence", "fluency"], rate=0.25, base_url="http://127.0.0.1:9/v1",
         model="judge-m", key_env="JUDGE_KEY", filter='latency_ms > 2000 and not error', cap=100)
    assert any("version 1" in s.value for s in at.success), [e.value for e in at.error]
    rule = home_store.monitor_rule("shop", "quality")
    assert (rule["metrics"], rule["sample_rate"], rule["key_env"], rule["filter"], rule["max_per_hour"],
            rule["budget_per_day"]) == (["coherence", "fluency"], 0.25, "JUDGE_KEY", "latency_ms > 2000 and not error",
                                        100, None)
    assert (rule["judge"]["model"], rule["judge"]["base_url"]) == ("judge-m", "http://127.0.0.1:9/v1")
    save(rate=0.5)
    assert home_store.monitor_rule("shop", "quality")["version"] == 2
    save(filter="latency_ms >")
    assert at.error and as_read(at.error[0].value).startswith("The rule was not saved") and "column" in as_read(at.error[0].value)
    save(filter="", budget=5.0)
    assert at.error and "needs the price of the judge model 'judge-m'" in as_read(at.error[0].value)
    assert home_store.monitor_rule("shop", "quality")["version"] == 2  # nothing refused was stored
    save(price="2.5,1.25,10")
    assert home_store.monitor_rule("shop", "quality")["budget_per_day"] == 5.0


def test_an_opened_trace_shows_its_turns_and_tool_calls_with_what_the_project_redacts_masked(home_store, tmp_path):
    """The trace view the Results page's Trace tab draws (ui.trace), from the trace's raw spans: the user's message,
    the model's tool call with its arguments, the tool's result and error, each span's latency and tokens; an
    address the project redacts shows as its label, never as sent (the spans are stored as the app sent them)."""
    import json

    from evaluators.monitor.redact import set_project

    ids = plant(home_store, tmp_path)
    tid = hashlib.md5(b"agent").hexdigest()
    user = [{"role": "user", "parts": [{"type": "text", "content": "Refund order 7 to ann@example.com please"}]}]
    call = [{"type": "tool_call", "id": "c1", "name": "lookup_order", "arguments": {"order": 7}}]
    chat = {**_span(tid, "d" * 16, "chat gpt-4o", ms=400), "events": [], "attributes": {
        "gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(user),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": call}]),
        "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 9}}
    tool = {**_span(tid, "e" * 16, "execute_tool lookup_order", parent="d" * 16, start=1_500_000_000, ms=250,
                    code=2, message="order service unavailable"), "events": [],
            "attributes": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                           "gen_ai.tool.call.id": "c1", "gen_ai.tool.call.arguments": '{"order": 7}'}}
    home_store.receive_telemetry("shop", [chat, tool])
    set_project(home_store, "shop", kinds=["email"])
    page = shown_text(app(PAGE, project="shop", trace=tid, allow_errors=True))  # the tool's error, marked
    assert "Agent trace" in page and "2 turns · 1 tool call · 1 with an error" in page
    assert "Refund order 7 to [EMAIL] please" in page and "ann@example.com" not in page
    assert "lookup_order · id c1 · error result · 250 ms" in page and '"order": 7' in page
    assert "order service unavailable" in page and "chat gpt-4o · 400 ms · 129 tokens (120 in, 9 out)" in page
    assert "Agent trace" not in shown_text(app(PAGE, project="shop", trace=ids["failed"]))  # no GenAI span there
