"""Rules' filters, hourly caps, daily budgets, forecasts and backfills (evaluators/monitor/rules.py, filters.py,
facts.py), on both stores. Traces go in as OTLP spans through the real decoder, store and assembler (so their facts
are what the assembler computed); filters are checked against a Python comprehension over what was planted; judging
goes through the engine to the loopback judge, whose calls and usage give the expected counts and costs."""
from __future__ import annotations

import datetime as dt
import json
import random
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest
import sqlalchemy as sa
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from evaluators.monitor import otlp
from evaluators.monitor.assemble import assemble_once
from evaluators.monitor.filters import FilterError, parse_filter
from evaluators.monitor.rules import decide
from evaluators.store.schema import utcnow
from evaluators.store.store import Store
from tests.conftest import ROOT, env_for_subprocess
from tests.judge_server import prompt_text
from tests.monitor_procs import pb_span, traces_request

pytestmark = pytest.mark.both_stores
START = 1_764_320_000_000_000_000  # 2025-11-28T08:53:20Z
PRICE = "1000,,1000"  # USD per 1M tokens: a call of ~300 tokens costs ~$0.3, so a budget of $1 holds a few


def cli(*args: str, db: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evaluators", "monitor", *args, "--db", db], cwd=ROOT,
                          capture_output=True, text=True, env=env_for_subprocess(), timeout=300)


def _kv(key, value) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


@dataclass
class Planted:
    """What a planted trace carries, as the test knows it (not as the code under test reads it)."""

    n: int
    model: str = "gpt-4o"
    service: str = "shop"
    retrieve: bool = False
    tenant: str | None = None
    error: bool = False
    latency_ms: int = 1000
    tokens_in: int = 100
    tokens_out: int = 50
    cost: float | None = None
    feedback: float | bool | None = None
    content: bool = True

    @property
    def trace_id(self) -> str:
        return f"{self.n:032x}"


def plant(store, project: str, traces: list[Planted]) -> None:
    """Send each trace's spans (a root, a chat span, maybe a retrieval) and map them (quiet period 0)."""
    for p in traces:
        base = START + p.n * 10_000_000_000
        root_attrs = {"app.tenant": p.tenant} if p.tenant else {}
        if p.feedback is not None:
            root_attrs["user_feedback.score"] = p.feedback
        root = pb_span(p.n, 1, name="handle request", start=base, end=base + p.latency_ms * 1_000_000)
        root.attributes.extend(_kv(k, v) for k, v in root_attrs.items())
        chat_attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": p.model,
                      "gen_ai.response.model": p.model, "gen_ai.usage.input_tokens": p.tokens_in,
                      "gen_ai.usage.output_tokens": p.tokens_out}
        if p.content:
            chat_attrs["gen_ai.input.messages"] = json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": f"question {p.n}"}]}])
            chat_attrs["gen_ai.output.messages"] = json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": f"answer {p.n}"}]}])
        if p.cost is not None:
            chat_attrs["gen_ai.usage.cost"] = p.cost
        chat = pb_span(p.n, 2, parent=1, name=f"chat {p.model}", start=base + 1, end=base + 2)
        chat.attributes.extend(_kv(k, v) for k, v in chat_attrs.items())
        if p.error:
            chat.status.code = 2
        spans = [root, chat] + ([pb_span(p.n, 3, parent=1, name="retrieve", start=base + 1)] if p.retrieve else [])
        got, refused = otlp.decode_traces(traces_request(spans, service=p.service), otlp.PROTOBUF)
        assert refused == []
        store.receive_telemetry(project, got)
    assert assemble_once(store, utcnow() + dt.timedelta(seconds=60)) == len(traces)


def random_traces(count: int, seed: int = 7) -> list[Planted]:
    rnd = random.Random(seed)
    return [Planted(n=i + 1, model=rnd.choice(["gpt-4o", "gpt-4o-mini", "llama3"]),
                    service=rnd.choice(["shop", "cart", "search"]), retrieve=rnd.random() < 0.4,
                    tenant=rnd.choice(["acme", "globex", None]), error=rnd.random() < 0.2,
                    latency_ms=rnd.choice([300, 1500, 2500, 4000]), tokens_in=rnd.randrange(10, 400),
                    tokens_out=rnd.randrange(5, 200), cost=rnd.choice([None, 0.002, 0.03]),
                    feedback=rnd.choice([None, 0.0, 0.25, 0.9, True, False]), content=rnd.random() < 0.85)
            for i in range(count)]


# (filter, the same question asked of what was planted)
FILTERS = [
    ('model == "gpt-4o" and latency_ms > 2000 and not error',
     lambda p: p.model == "gpt-4o" and p.latency_ms > 2000 and not p.error),
    ('"retrieve" in span_names', lambda p: p.retrieve),
    ('attributes["app.tenant"] == "acme"', lambda p: p.tenant == "acme"),
    ('feedback < 0.5', lambda p: p.feedback is not None and float(p.feedback) < 0.5),
    ('service_name in ["cart", "search"] and tokens >= 300',
     lambda p: p.service in ("cart", "search") and p.tokens_in + p.tokens_out >= 300),
    ("cost > 0.01 or (error and input_tokens < 100)",
     lambda p: (p.cost is not None and p.cost > 0.01) or (p.error and p.tokens_in < 100)),
    ('not ("app.tenant" in attributes) and models == ["llama3"]', lambda p: p.tenant is None and p.model == "llama3"),
    ("feedback == null", lambda p: p.feedback is None),
    ('latency_ms < 2500 and provider == null and model != "llama3"',  # 2500 was planted: < is not <=
     lambda p: p.latency_ms < 2500 and p.model != "llama3"),
]


def test_a_filter_decides_as_a_comprehension_over_the_planted_traces_says(store_url):
    store = Store(store_url)
    store.ensure_monitor_project("shop", quiet_seconds=0)
    for k, (expr, _) in enumerate(FILTERS):
        store.add_monitor_rule("shop", f"f{k}", ["coherence"], 1.0, None, filter=expr)
    traces = random_traces(120)
    plant(store, "shop", traces)
    for k, (expr, holds) in enumerate(FILTERS):
        rule = store.monitor_rule("shop", f"f{k}")
        assert decide(store, "shop", rule) == len(traces)
        got = {t: d["decision"] for t, d in store.decisions("shop", f"f{k}", 1).items()}
        want = {p.trace_id: ("no_content" if not p.content else "pending") if holds(p) else "filtered_out"
                for p in traces}
        assert got == want, expr
        assert 0 < sum(v == "filtered_out" for v in want.values()) < len(traces), expr  # the filter cuts somewhere


def test_a_filter_that_cannot_be_read_is_refused_at_rule_add_naming_where(store_url):
    store = Store(store_url)
    store.ensure_monitor_project("shop")
    p = cli("rule", "add", "--project", "shop", "--name", "r", "--metrics", "coherence", "--filter",
            'latency_ms > 2000 and modle == "gpt-4o"', db=store_url)
    assert p.returncode == 2 and "unknown name 'modle'" in p.stderr and "at column 23" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and store.monitor_rule("shop", "r") is None  # nothing stored
    for expr, where, what in (('model = "gpt-4o"', 7, "compare with =="),  # what rule add checks, in-process
                              ('latency_ms > 2000 and', 22, "expected a value"),
                              ('attributes[tenant] == "x"', 12, "an attribute's name in quotes"),
                              ("(" * 40 + "error" + ")" * 40, 33, "nested more than 32 deep"),
                              ("not " * 40 + "error", 129, "nested more than 32 deep"),
                              ('model == "gpt-4o', 10, "a text not closed"),
                              ("error or " * 300 + "error", None, "characters (at most 2,000)")):
        with pytest.raises(FilterError) as e:
            parse_filter(expr)
        assert what in str(e.value) and (where is None or f"at column {where}:" in str(e.value)), (expr, e.value)


def _set_mapped_at(store, times: dict[str, dt.datetime]) -> None:
    with store.engine.begin() as c:
        for tid, at in times.items():
            c.execute(sa.text("UPDATE monitor_traces SET mapped_at = :a WHERE trace_id = :t"), {"a": at, "t": tid})


def test_an_hourly_cap_admits_the_first_traces_of_any_hour_in_order_of_arrival(store_url, judge_server):
    store = Store(store_url)
    store.ensure_monitor_project("shop", quiet_seconds=0)
    p = cli("rule", "add", "--project", "shop", "--name", "capped", "--metrics", "coherence", "--max-per-hour", "3",
            "--judge-base-url", judge_server.url, db=store_url)
    assert p.returncode == 0, p.stderr
    minutes = [0, 5, 10, 20, 50, 61, 62, 65, 70, 71, 130, 131, 132, 133, 190]
    traces = [Planted(n=i + 1) for i in range(len(minutes))]
    plant(store, "shop", traces)
    t0 = store.monitor_rule("shop", "capped")["created_at"] + dt.timedelta(minutes=1)
    # arrival order differs from trace-id order: the cap follows arrival
    arrival = {p.trace_id: t0 + dt.timedelta(minutes=m) for p, m in zip(reversed(traces), minutes)}
    _set_mapped_at(store, arrival)
    p = cli("rule", "run", "--project", "shop", db=store_url)
    assert p.returncode == 0, p.stderr

    admitted: list[dt.datetime] = []  # by hand: a trace is admitted while fewer than 3 were in the hour up to it
    want = {}
    for tid, at in sorted(arrival.items(), key=lambda x: x[1]):
        ok = sum(at - dt.timedelta(hours=1) < a <= at for a in admitted) < 3
        admitted += [at] if ok else []
        want[tid] = "judged" if ok else "over_hourly_cap"
    got = {t: d["decision"] for t, d in store.decisions("shop", "capped", 1).items()}
    assert got == want
    assert list(want.values()).count("over_hourly_cap") == 5  # minutes 20, 50, 62, 71, 133 (by hand too)
    assert len(judge_server.calls) == len(admitted)  # capped traces are never sent to the judge
    # and no hour-long window anywhere holds more than 3
    assert all(sum(x - dt.timedelta(hours=1) < a <= x for a in admitted) <= 3 for x in admitted)
    status = json.loads(cli("status", "--project", "shop", "--json", db=store_url).stdout)
    assert status["rules"]["capped"]["over_hourly_cap"] == 5 and status["rules"]["capped"]["judged"] == 10


def test_a_daily_budget_stops_judging_cleanly_and_a_new_utc_day_goes_on(store_url, judge_server):
    store = Store(store_url)
    store.ensure_monitor_project("shop", quiet_seconds=0)
    p = cli("rule", "add", "--project", "shop", "--name", "thrifty", "--metrics", "coherence", "--budget-per-day", "1",
            "--price", PRICE, "--concurrency", "1", "--judge-base-url", judge_server.url, db=store_url)
    assert p.returncode == 0, p.stderr
    traces = [Planted(n=i + 1) for i in range(8)]
    plant(store, "shop", traces)
    t0 = store.monitor_rule("shop", "thrifty")["created_at"] + dt.timedelta(seconds=1)
    _set_mapped_at(store, {p.trace_id: t0 + dt.timedelta(seconds=i) for i, p in enumerate(traces)})
    p = cli("rule", "run", "--project", "shop", db=store_url)
    assert p.returncode == 0, p.stderr
    got = {t: d["decision"] for t, d in store.decisions("shop", "thrifty", 1).items()}
    order = [got[p.trace_id] for p in traces]
    k = order.count("judged")
    assert 1 <= k < len(traces) and order == ["judged"] * k + ["over_budget"] * (len(traces) - k), order
    spent = sum((u["prompt_tokens"] + u["completion_tokens"]) * 1000 / 1e6 for u in judge_server.usages)
    assert len(judge_server.usages) == k and spent <= 1.0
    assert f"{len(traces) - k} over budget (the day's budget of $1.0000 reached" in p.stdout, p.stdout

    plant(store, "shop", [Planted(n=100)])  # the day's budget is spent: not sent to the judge
    p = cli("rule", "run", "--project", "shop", db=store_url)
    assert store.decisions("shop", "thrifty", 1)[Planted(n=100).trace_id]["decision"] == "over_budget"
    assert len(judge_server.usages) == k and "1 over budget" in p.stdout

    with store.engine.begin() as c:  # the rule's runs were yesterday: today's budget is whole again
        c.execute(sa.text("UPDATE runs SET created_at = :y"), {"y": utcnow() - dt.timedelta(days=1)})
    plant(store, "shop", [Planted(n=101)])
    assert cli("rule", "run", "--project", "shop", db=store_url).returncode == 0
    assert store.decisions("shop", "thrifty", 1)[Planted(n=101).trace_id]["decision"] == "judged"
    status = json.loads(cli("status", "--project", "shop", "--json", db=store_url).stdout)
    assert status["rules"]["thrifty"] == {
        "filtered_out": 0, "sampled_out": 0, "over_hourly_cap": 0, "over_budget": len(traces) - k + 1,
        "no_content": 0, "pending": 0, "judged": k + 1, "failed": 0}


def test_a_budget_without_a_price_is_refused(store_url):
    store = Store(store_url)
    store.ensure_monitor_project("shop")
    p = cli("rule", "add", "--project", "shop", "--name", "r", "--metrics", "coherence", "--budget-per-day", "5",
            "--judge-model", "unpriced-model", db=store_url)
    assert p.returncode == 2 and "--budget-per-day needs the price of the judge model 'unpriced-model'" in p.stderr
    assert store.monitor_rule("shop", "r") is None


def test_a_new_rule_decides_later_traces_and_a_backfill_since_a_time_the_older_ones(store_url, judge_server):
    store = Store(store_url)
    store.ensure_monitor_project("shop", quiet_seconds=0)
    old = [Planted(n=i + 1) for i in range(6)]
    plant(store, "shop", old)  # started at START + n * 10 s, mapped before the rule
    assert cli("rule", "add", "--project", "shop", "--name", "late", "--metrics", "coherence", "--judge-base-url",
               judge_server.url, db=store_url).returncode == 0
    new = [Planted(n=50)]
    plant(store, "shop", new)
    assert cli("rule", "run", "--project", "shop", db=store_url).returncode == 0
    assert set(store.decisions("shop", "late", 1)) == {new[0].trace_id}
    since = dt.datetime.fromtimestamp((START + 4 * 10_000_000_000) / 1e9, dt.timezone.utc).isoformat()
    p = cli("rule", "run", "--project", "shop", "--since", since, db=store_url)
    assert p.returncode == 0 and "3 traces decided; 3 judged" in p.stdout, p.stdout
    got = store.decisions("shop", "late", 1)
    assert set(got) == {p.trace_id for p in old[3:] + new} and {d["decision"] for d in got.values()} == {"judged"}
    assert len(judge_server.calls) == 4


FORECAST = re.compile(r"forecast: ([\d,.]+) traces a day \((given|last day)\) x sample rate ([\d.]+) x filter's share "
                      r"([\d.]+)% x with content ([\d.]+)% = ([\d,.]+) judged a day( \(held to the hourly cap\))?\n"
                      r"forecast: ([\d,]+) judge tokens a judged trace \(([\d.]+) calls\), \$([\d.]+) a trace: "
                      r"\$([\d,.]+) a day(, held to the budget of \$[\d.]+ a day)?\n")


def test_a_rule_add_forecasts_its_cost_a_day_from_the_traffic_the_filter_and_the_engines_estimate(store_url,
                                                                                                   judge_server):
    from evaluators.judge.prices import VERDICT_TOKENS
    from evaluators.judge.tokens import tokenizer_for

    store = Store(store_url)
    store.ensure_monitor_project("shop", quiet_seconds=0)
    traces = random_traces(40, seed=11)
    plant(store, "shop", traces)
    rule = ("--metrics", "coherence", "--filter", '"retrieve" in span_names', "--price", PRICE, "--judge-base-url",
            judge_server.url, "--judge-model", "judge-a")
    given = cli("rule", "add", "--project", "shop", "--name", "f", "--sample-rate", "0.5", *rule,
                "--traces-per-hour", "10", db=store_url)
    lastday = cli("rule", "forecast", "--project", "shop", "--name", "f", db=store_url)
    held = cli("rule", "add", "--project", "shop", "--name", "held", "--sample-rate", "1", *rule, "--max-per-hour",
               "1", "--budget-per-day", "2", "--traces-per-hour", "1000", db=store_url)
    assert all(p.returncode == 0 for p in (given, lastday, held)), (given.stderr, lastday.stderr, held.stderr)
    assert judge_server.calls == []  # a forecast asks the judge nothing
    # what the rule would have judged of the planted traces, by a comprehension
    kept = [p for p in traces if p.retrieve]
    share, content = len(kept) / len(traces), sum(p.content for p in kept) / len(kept)
    # the judge calls those traces make, by judging them (a rule with the same filter, every trace, a backfill)
    assert cli("rule", "add", "--project", "shop", "--name", "all", *rule, db=store_url).returncode == 0
    assert cli("rule", "run", "--project", "shop", "--name", "all", "--since", "2000-01-01", db=store_url).returncode == 0
    assert len(judge_server.calls) == sum(p.content for p in kept)
    tok = tokenizer_for("judge-a")
    usd_trace = sum(tok.count_messages(c["messages"]) + VERDICT_TOKENS for c in judge_server.calls) \
        / len(judge_server.calls) * 1000 / 1e6
    for p, per_day, rate, source in ((given, 240, 0.5, "given"), (lastday, 40, 0.5, "last day")):
        m = FORECAST.search(p.stdout)
        assert m, p.stdout
        assert (float(m[1].replace(",", "")), m[2], float(m[3])) == (per_day, source, rate)
        assert (float(m[4]), float(m[5])) == (round(share * 100, 1), round(content * 100, 1))
        judged = per_day * rate * share * content
        assert float(m[6].replace(",", "")) == round(judged, 1) and m[7] is None
        assert float(m[9]) == 1 and float(m[10]) == pytest.approx(usd_trace, abs=1e-6)
        assert float(m[11].replace(",", "")) == pytest.approx(judged * usd_trace, abs=1e-4)
    m = FORECAST.search(held.stdout)
    assert m and float(m[6]) == 24 and m[7] and m[12] == ", held to the budget of $2.0000 a day", held.stdout
    assert float(m[11]) == pytest.approx(24 * usd_trace, abs=1e-4)


@pytest.mark.no_store
@pytest.mark.parametrize("config", ["v2-span", "openinference", "openllmetry"])
def test_facts_of_real_instrumentations_traces_hold_what_the_app_sent_and_no_content(config, judge_server, tmp_path):
    """The facts of traces made by the real instrumentations (tests/otel_apps.py): the model, tokens and service the
    app used, every span's name, and not one word the app said or was told among the attributes."""
    from collections import defaultdict

    from evaluators.monitor.facts import trace_facts
    from evaluators.monitor.mapping import map_trace
    from tests.judge_server import Action
    from tests.otel_apps import CONFIGS, SCENARIOS, TOOL_QUESTIONS
    from tests.test_monitor_mapping import _answer, _tool_reply

    judge_server.responder = _answer  # as test_monitor_mapping's run_app sets the loopback model up
    for n, fn in enumerate(SCENARIOS[config], 1):
        if fn.__name__ in TOOL_QUESTIONS:
            judge_server.on_prompt(TOOL_QUESTIONS[fn.__name__], Action(raw_body=_tool_reply(n)))
    out = tmp_path / config
    done = subprocess.run([sys.executable, "-m", "tests.otel_apps", config, judge_server.url, str(out)], cwd=ROOT,
                          env=env_for_subprocess(**CONFIGS[config]), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    spans, logs = (otlp.decode_traces((out / "traces.pb").read_bytes(), otlp.PROTOBUF)[0],
                   otlp.decode_logs((out / "logs.pb").read_bytes(), otlp.PROTOBUF)[0])
    by_trace, logs_by = defaultdict(list), defaultdict(list)
    for s in spans:
        by_trace[s["trace_id"]].append(s)
    for r in logs:
        logs_by[r["trace_id"]].append(r)
    expected = json.loads((out / "expected.json").read_text())
    said = {c["content"] for c in judge_server.calls for c in c["messages"] if isinstance(c.get("content"), str)}
    said |= {_answer(prompt_text(c), c) for c in judge_server.calls}
    for scenario, want in expected.items():
        group = by_trace[want["trace_id"]]
        facts = trace_facts(group, logs_by[want["trace_id"]], map_trace(group, logs_by[want["trace_id"]]).fields)
        assert facts["service_name"] == "weather-app" and facts["span_names"] == sorted({s["name"] for s in group})
        assert facts["error"] is False and facts["span_count"] == len(group)
        if scenario == "simple":
            assert facts["model"] == want["model"] and want["model"] in facts["models"]
            assert facts["tokens"] == want["input_tokens"] + want["output_tokens"]
        kept = json.dumps(facts["attributes"], ensure_ascii=False)
        assert not [t for t in said if len(t) > 8 and t[:40] in kept], (scenario, kept)  # no prompt or answer
        assert facts["attributes"]  # (and still some attributes: the instrumentation's own)


def test_a_backfilled_trace_is_held_to_the_cap_of_the_hours_after_it_too(store_url):
    """Traces decided out of order (a backfill of older ones after newer ones were admitted): one is admitted only
    if no hour-long window holding it, ending before or after it, would pass the cap."""
    store = Store(store_url)
    store.ensure_monitor_project("shop", quiet_seconds=0)
    store.add_monitor_rule("shop", "capped", ["coherence"], 1.0, None, max_per_hour=2)
    rule = store.monitor_rule("shop", "capped")
    traces = [Planted(n=i + 1) for i in range(4)]
    plant(store, "shop", traces)
    t = rule["created_at"]
    minutes = {1: 30, 2: 40, 3: -10, 4: -90}  # 3 and 4 were mapped before the rule: a backfill takes them
    _set_mapped_at(store, {p.trace_id: t + dt.timedelta(minutes=minutes[p.n]) for p in traces})
    assert decide(store, "shop", rule) == 2
    assert decide(store, "shop", rule, since_ns=START) == 2
    got = {int(tid, 16): d["decision"] for tid, d in store.decisions("shop", "capped", 1).items()}
    # by hand: 3 (at -10) would make the window (-20, 40] hold 3 traces; 4 (at -90) has none within the hour
    assert got == {1: "pending", 2: "pending", 3: "over_hourly_cap", 4: "pending"}
    admitted = [minutes[n] for n, d in got.items() if d == "pending"]
    assert all(sum(x - 60 < a <= x for a in admitted) <= 2 for x in range(-200, 200))
    # a new version deciding the same traces again counts each once: the same decisions
    assert store.add_monitor_rule("shop", "capped", ["coherence"], 1.0, None, max_per_hour=2,
                                  filter="span_count > 0") == 2
    assert decide(store, "shop", store.monitor_rule("shop", "capped"), since_ns=START) == 4
    assert {int(tid, 16): d["decision"] for tid, d in store.decisions("shop", "capped", 2).items()} == got
