"""The Results page read as a user reads it (issue 10): AppTest on runs stored with known scores.

Expected numbers are counted by hand from the stored scores, intervals from scipy's Wilson interval.
"""
from __future__ import annotations

import json

import pytest

from evaluators import Store, load_dataset
from evaluators.run.spec import RunSpec
from evaluators.store.schema import Result, utcnow
from tests.apptest import app, as_read

st_testing = pytest.importorskip("streamlit.testing.v1")
pytestmark = pytest.mark.usefixtures("fresh_caches")  # each test starts on empty Streamlit caches

# 10 rows: coherence 6 of 10 at or above 3 (60%); f1 scores 3 of 10 at or above 0.5 (30%);
# violence severities, 2 of 10 above 3 (defect rate 20%); protected material true on 1 row (10%).
COHERENCE = [5, 4, 3, 2, 1, 5, 4, 2, 1, 3]
F1 = [0.421348, 0.9, 0.1, 0.55, 0.2, 0.3, 0.5, 0.0, 0.25, 0.05]
VIOLENCE = [0, 1, 4, 0, 2, 7, 0, 3, 1, 0]
PROTECTED = [False] * 9 + [True]
ROWS = [{"query": f"question {i}", "response": f"answer {i}", "ground_truth": f"truth {i}", "context": f"doc {i}"}
        for i in range(10)]


def judged(i: int, metric: str, value, outputs: dict, reason: str, turn: int = 0) -> Result:
    return Result(i, metric, turn, "ok", value=float(value), outputs=outputs, reason=reason,
                  raw=json.dumps({"reason": reason, "score": value}), prompt_tokens=100, completion_tokens=20,
                  latency_ms=12.0, meta={"model": "loopback"})


def known_results(rows=range(10)) -> list[Result]:
    out = []
    for i in rows:
        out.append(judged(i, "coherence", COHERENCE[i], {"coherence": float(COHERENCE[i])}, f"coherence reason {i}"))
        out.append(Result(i, "f1_score", 0, "ok", value=F1[i], outputs={"f1_score": F1[i]}, reason="ok"))
        out.append(judged(i, "violence", VIOLENCE[i], {"violence_score": float(VIOLENCE[i])}, f"violence reason {i}"))
        out.append(judged(i, "protected_material", float(PROTECTED[i]), {"protected_material_label": PROTECTED[i]},
                          f"protected reason {i}"))
    return out


METRICS = ["coherence", "f1_score", "violence", "protected_material"]


def stored_run(store: Store, results: list[Result], metrics=METRICS, rows=ROWS, status="completed",
               total: int | None = None, thresholds: dict | None = None) -> str:
    """A run stored the way the runner leaves one: dataset, spec, results, progress counters."""
    did = store.save_dataset(load_dataset(rows))
    rid = store.create_run(did, RunSpec(list(metrics), dict(thresholds or {})).to_dict(), "h", "known scores")
    store.write_results(rid, results)
    now = utcnow()
    store.update_run(rid, status=status, started_at=now, heartbeat_at=now,
                     finished_at=None if status == "running" else now,
                     tasks_total=total if total is not None else len(results), tasks_done=len(results))
    return rid


def cards(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def charts(at) -> list[dict]:
    """Every Vega-Lite chart on the page, as the specification the browser receives."""
    return [json.loads(e.proto.spec) for e in at.get("vega_lite_chart")]


def figure(at, name: str) -> dict:
    """The chart named ``name`` (its ``usermeta.chart``), or the view of a grid of charts so named (its
    ``description``)."""
    for c in charts(at):
        if c.get("usermeta", {}).get("chart") == name:
            return c
        for row in c.get("vconcat", []):
            for view in row.get("hconcat", []):
                if view.get("description") == name:
                    return view
    raise AssertionError(f"no chart {name}")


def overview_rows(at) -> list[dict]:
    """The overview's rate rows, top to bottom (the order the chart sorts its axis by)."""
    left = figure(at, "overview")["hconcat"][0]
    rows = {r["metric"]: r for r in left["data"]["values"]}
    return [rows[m] for m in left["encoding"]["y"]["sort"]]


def overview_counts(at) -> dict[str, list[int]]:
    """The overview's row counts per kind (scored, errored...), one per metric top to bottom."""
    right = figure(at, "overview")["hconcat"][1]
    order = right["encoding"]["y"]["sort"]
    out: dict[str, dict] = {}
    for c in right["data"]["values"]:
        out.setdefault(c["rows"], {})[c["metric"]] = c["n"]
    return {k: [v[m] for m in order] for k, v in out.items()}


def wilson(k: int, n: int) -> tuple[float, float]:
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return ci.low, ci.high


def walk(node):
    """Every element under a node of AppTest's tree, in page order."""
    children = getattr(node, "children", None)
    if getattr(node, "type", None) == "expander":
        yield node
    if not children:
        yield node
        return
    for child in children.values():
        yield from walk(child)


# ------------------------------------------------------------------ names and numbers
@pytest.mark.parametrize("metric,key,label", [
    ("coherence", None, "coherence"), ("f1_score", None, "f1_score"), ("rouge", None, "rouge f1 score"),
    ("rouge", "rouge_recall", "rouge recall"), ("bleu", None, "bleu score"), ("violence", None, "violence score"),
    ("protected_material", None, "protected_material label"),
    ("indirect_attack", "indirect_attack_intrusion", "indirect_attack intrusion")])
def test_readable_output_labels(metric, key, label):
    from evaluators.read.charts_overview import output_label
    from evaluators.core.registry import get_metric

    assert output_label(get_metric(metric), key) == label


@pytest.mark.parametrize("value,text", [(0.421348, "0.4213"), (4.0, "4"), (3.5, "3.5"), (0.0, "0"),
                                        (12.34567, "12.35"), (None, "–"), (float("nan"), "–")])
def test_scores_have_sensible_digits(value, text):
    from evaluators.read.charts_overview import number

    assert number(value) == text


# ------------------------------------------------------------------ the overview
def test_overview_draws_each_rate_with_its_wilson_interval_coloured_by_the_target(home_store):
    from evaluators.read.charts_overview import FAIL, PASS, UNSURE

    app()
    rid = stored_run(home_store, known_results())
    at = app("pages/results.py", run=rid)
    rows = overview_rows(at)
    # hand counts over 10 rows; the first metric at the top
    expected = {"Coherence · pass rate 60%": 6, "F1 word overlap · pass rate 30%": 3,
                "Violence · defect rate 20%": 2, "Protected material · defect rate 10%": 1}
    assert [r["metric"] for r in rows] == list(expected)
    for r in rows:
        k = expected[r["metric"]]
        lo, hi = wilson(k, 10)
        assert r["rate"] == pytest.approx(k / 10) and r["low"] == pytest.approx(lo, abs=1e-4)
        assert r["high"] == pytest.approx(hi, abs=1e-4)
    # target 80%: the defect rates' target is 20%
    assert [r["target"] for r in rows] == pytest.approx([0.8, 0.8, 0.2, 0.2])
    # pass intervals: coherence 31-83% straddles 80%; f1 11-60% is below; violence 49-94% and
    # protected material 60-98% (1 - the defect interval) straddle it
    assert [r["colour"] for r in rows] == [UNSURE, FAIL, UNSURE, UNSURE]
    at.number_input(key="target").set_value(50).run()
    # at 50%: protected material's 60-98% is wholly above; f1's 11-60% straddles
    assert [r["colour"] for r in overview_rows(at)] == [UNSURE, UNSURE, UNSURE, PASS]
    at.number_input(key="target").set_value(20).run()
    assert [r["colour"] for r in overview_rows(at)] == [PASS, UNSURE, PASS, PASS]
    assert any(c.value.startswith("3 of 4 metrics meet the 20% target; 1 too close to tell") for c in at.caption)


def test_a_partially_stored_run_shows_what_has_finished(home_store):
    app()
    # rows 0-3 of 10 done (4 metrics each), the run still going: 16 of 40 tasks
    rid = stored_run(home_store, known_results(range(4)), status="running", total=40)
    at = app("pages/results.py", run=rid)
    # rows 0-3: coherence 5 4 3 2 (3 of 4 >= 3), f1 .42 .9 .1 .55 (2 of 4), violence 0 1 4 0 (1 of 4 > 3)
    assert cards(at) == {"Rows": "10", "Errored rows": "0", "Coherence pass rate": "75%",
                         "F1 word overlap pass rate": "50%", "Violence defect rate": "25%",
                         "Protected material defect rate": "0%"}
    counts = overview_counts(at)
    assert counts["scored"] == [4] * 4 and counts["pending"] == [6] * 4 and counts["errored"] == [0] * 4
    coherence = figure(at, "distribution.coherence")
    bars = coherence["layer"][0]["data"]["values"]
    assert [(b["score"], b["rows"]) for b in bars] == [(1, 0), (2, 1), (3, 1), (4, 1), (5, 1)]
    # its title: the average of 5 4 3 2, the pass rate 3 of 4 with its Wilson interval, the counts
    lo, hi = wilson(3, 4)
    # its readable name and what it measures, not its key (issue 35), then the numbers
    assert coherence["title"]["text"] == "Coherence"
    assert " ".join(coherence["title"]["subtitle"][:2]) == ("How well the response's ideas connect and read as one "
                                                            "logical whole.")  # in lines the panel's width holds
    assert coherence["title"]["subtitle"][3:] == [f"pass rate 75.0% ({lo:.1%}–{hi:.1%})",
                                                  "4 scored · 0 errored · 0 skipped · 6 pending"]
    assert coherence["title"]["subtitle"][2].startswith("average 3.5 (95% CI ")
    assert figure(at, "distribution.f1_score")["title"]["text"] == "F1 word overlap"
    help_ = {m.label: m.help for m in at.metric}
    assert help_["F1 word overlap pass rate"].startswith("F1 word overlap (f1_score): Share of words in common with the "
                                                  "ground truth")
    # two more rows land, one of them an error: the next render reads them
    more = [r for r in known_results(range(4, 6)) if r.metric != "coherence" or r.row_idx == 5]
    more.append(Result(4, "coherence", 0, "error", error="judge said nothing"))
    home_store.write_results(rid, more)
    home_store.update_run(rid, tasks_done=24, heartbeat_at=utcnow())
    at.run()
    assert cards(at)["Errored rows"] == "1" and cards(at)["Coherence pass rate"] == "80%"  # 5 4 3 2 5: 4 of 5
    counts = overview_counts(at)
    assert counts["errored"] == [1, 0, 0, 0] and counts["scored"] == [5, 6, 6, 6]  # coherence first


def test_the_figures_and_sliders_are_drawn_only_while_their_tab_is_open(home_store):
    app()
    rid = stored_run(home_store, known_results())
    at = app("pages/results.py", run=rid, view="Rows", row="1", **{"th.coherence": "4"})
    assert charts(at) == []
    assert cards(at)["Coherence pass rate"] == "40%"  # the thresholds (from the URL) still hold on the other tabs
    assert not [s for s in at.slider if s.key.startswith("th.")]  # while their sliders wait in their own tab
    at = app("pages/results.py", run=rid, view="Metrics")  # the overview and 4 distributions, three to a row
    assert [c["usermeta"]["chart"] for c in charts(at)] == ["overview", "distributions"]
    rows = figure(at, "distributions")["vconcat"]
    assert [[v["description"] for v in r["hconcat"]] for r in rows] == [
        [f"distribution.{m}" for m in METRICS[:3]], [f"distribution.{METRICS[3]}"]]
    at = app("pages/results.py", run=rid, view="Thresholds")  # a curve per metric with a threshold
    assert [c["usermeta"]["chart"] for c in charts(at)] == [f"whatif.{m}" for m in METRICS[:3]]


# ------------------------------------------------------------------ thresholds
def test_threshold_what_if_curves_follow_the_slider_and_labels_have_no_threshold(home_store):
    app()
    rid = stored_run(home_store, known_results())
    at = app("pages/results.py", run=rid, view="Thresholds")
    assert {s.key for s in at.slider if s.key.startswith("th.")} == {"th.coherence", "th.f1_score", "th.violence"}  # no protected_material
    assert "whatif.protected_material" not in [c["usermeta"]["chart"] for c in charts(at)]

    def curve(name):
        return [(p["threshold"], p["rate"]) for p in figure(at, f"whatif.{name}")["layer"][0]["data"]["values"]]

    def now(name):  # the marked point and the rate written beside it
        point, text = figure(at, f"whatif.{name}")["layer"][2:]
        assert point["data"] == text["data"]
        return [(p["threshold"], p["rate"], p["label"]) for p in point["data"]["values"]]

    # coherence 5 4 3 2 1 5 4 2 1 3: at least t for t = 1..5 -> 10, 8, 6, 4, 2 of 10
    assert [t for t, _ in curve("coherence")] == [1, 2, 3, 4, 5]
    assert [r for _, r in curve("coherence")] == pytest.approx([1, .8, .6, .4, .2])
    assert now("coherence") == [(3, pytest.approx(.6), "60%")]
    # severities 0 1 4 0 2 7 0 3 1 0: above t for t = 0..7 -> 6, 4, 3, 2, 1, 1, 1, 0 of 10 (defect rate)
    assert [r for _, r in curve("violence")] == pytest.approx([.6, .4, .3, .2, .1, .1, .1, 0])
    at.slider(key="th.coherence").set_value(4.0).run()
    assert now("coherence") == [(4, pytest.approx(.4), "40%")]
    assert cards(at)["Coherence pass rate"] == "40%"


# ------------------------------------------------------------------ the row detail
def test_row_detail_reasoning_first_raw_reply_collapsed_and_no_reason_for_classic_metrics(home_store):
    app()
    rid = stored_run(home_store, known_results())
    at = app("pages/results.py", run=rid, row="1", view="Rows")
    order = [getattr(e, "value", None) if e.type != "expander" else f"EXPANDER {e.label}"
             for e in walk(at.main)]
    order = [x for x in order if isinstance(x, str)]
    head = order.index("**coherence: 5** :green[**pass**]")
    reason = order.index("coherence reason 0")
    raw = next(k for k, x in enumerate(order) if x.startswith("EXPANDER coherence: raw"))
    assert head < reason < raw
    expander = next(e for e in at.expander if e.label.startswith("coherence: raw"))
    assert not expander.proto.expanded  # the raw reply is one click away, closed
    # f1 (computed in process): its value with four significant digits, and nothing else
    assert "**f1\\_score: 0.4213** :red[**fail**]" in order
    assert "ok" not in order
    assert not any(e.label.startswith("f1_score") for e in at.expander)
    f1 = order.index("**f1\\_score: 0.4213** :red[**fail**]")
    assert order[f1 + 1].startswith("**violence")  # straight to the next metric
    assert "**protected\\_material: false** :green[**pass**]" in order  # a label reads as one
    # each metric's heading in the detail names it as the rows table's column does ("violence", not "violence score")
    heads = [x.split(":")[0].strip("*").replace("\\_", "_") for x in order if x.startswith("**") and ":" in x]
    assert set(heads) == {"coherence", "f1_score", "violence", "protected_material"} <= set(at.dataframe[0].value.columns)


def test_conversation_turns_carry_their_scores_and_the_worst_turn_is_marked(home_store):
    app()
    rows = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                          {"role": "user", "content": "help"}, {"role": "assistant", "content": "no"}]}]
    results = [judged(0, "coherence", 4, {"coherence": 4.0}, "t1", turn=0),
               judged(0, "coherence", 2, {"coherence": 2.0}, "t2", turn=1),
               judged(0, "violence", 1, {"violence_score": 1.0}, "calm", turn=0),
               judged(0, "violence", 5, {"violence_score": 5.0}, "violent", turn=1)]
    rid = stored_run(home_store, results, metrics=["coherence", "violence"], rows=rows)
    at = app("pages/results.py", run=rid, row="1", view="Rows")
    bubbles = [[as_read(c.value) for c in m.caption] for m in at.chat_message]
    assert bubbles[0] == [] and bubbles[2] == []  # user turns carry nothing
    # coherence: mean of 4 and 2 (no single decisive turn); violence: the worst turn (5) decides
    assert bubbles[1] == ["coherence 4 · pass", "violence 1 · pass"]
    assert bubbles[3] == ["coherence 2 · fail", ":red[**violence 5 · fail · ◀ worst turn, decides the row**]"]
    assert any(m.value == "**coherence: 3** :green[**pass**]" for m in at.markdown)


def test_two_runs_of_one_name_started_in_one_minute_stay_apart_in_the_picker(home_store):
    # Streamlit reads a selectbox's choice back by its text: same-named runs of the same minute once read
    # back as the other run on the next rerun (a tab click showed another run's thresholds)
    app()
    four = stored_run(home_store, known_results())
    one = stored_run(home_store, [r for r in known_results() if r.metric == "coherence"], metrics=["coherence"])
    at = app("pages/results.py", run=four)
    labels = at.selectbox[0].options
    assert len(labels) == 2 and len(set(labels)) == 2 and all(r in " ".join(labels) for r in (four, one))
    at.run()  # a rerun, as a tab click makes
    assert set(cards(at)) >= {"F1 word overlap pass rate", "Violence defect rate"}
    assert at.selectbox[0].value == four


def test_the_run_picker_opens_the_run_picked_and_a_link_still_opens_the_run_it_names(home_store):
    # The picker is a selectbox inside a popover (built only when opened): what it picks must reach
    # the URL and the page at once, and a link naming a run must win over an earlier pick.
    app()
    four = stored_run(home_store, known_results())
    one = stored_run(home_store, [r for r in known_results() if r.metric == "coherence"], metrics=["coherence"])
    at = app("pages/results.py", run=four)
    assert "Violence defect rate" in cards(at)
    label = at.get("popover")[0].proto.popover.label  # the button names the run shown (two same-named runs: by id)
    assert label.startswith("Run: ") and "known scores" in label and four in label and one not in label
    # a run's name in plain text, as Compare, Risk and safety and Runs show it: not a green code span (issue 35)
    assert "`" not in label and as_read(label).startswith("Run: known scores · completed · ")
    at.selectbox[0].set_value(one).run()
    assert at.query_params["run"] == one
    assert "Coherence pass rate" in cards(at) and "Violence defect rate" not in cards(at)
    assert one in at.get("popover")[0].proto.popover.label
    at.query_params["run"] = four  # a link to the first run, followed in the same session
    at.run()
    assert "Violence defect rate" in cards(at) and at.selectbox[0].value == four
