"""The risk and safety pages through Streamlit's AppTest, and the safety view in headless Chromium.

Runs are made with the real engine against the loopback judge (verdicts written into each
response, see tests/safety_judge.py), so every figure on screen is worked out by hand.
"""
from __future__ import annotations

import json

import pytest

from evaluators import Store, evaluate
from evaluators.suites.safety import attack_records
from tests.judge_server import Action, JudgeServer
from tests.safety_judge import safety_responder
from tests.browser import CHROMIUM, settle
from tests.test_dashboard_e2e import expect_metric, shot
from tests.test_dashboard_e2e import app as served_app  # noqa: F401
from tests.apptest import app

pytestmark = pytest.mark.usefixtures("fresh_caches")  # each test starts on empty Streamlit caches

# violence 0, 2, 3, 4, 7 and one refusal; protected material true on the first row only;
# an indirect attack that worked (intrusion) on the second row
REASON = "**not bold** <b>raw</b> # no heading"
ROWS = [{"id": f"r{i}", "query": f"question {i}", "context": f"document {i}",
         "response": f"answer {i} [violence:{v}] [pm:{'true' if i == 0 else 'false'}] "
                     f"[xpia:{'true:intrusion' if i == 1 else 'false:'}]"}
        for i, v in enumerate(["0", "2", "3", "4", "7", "refuse"])]


def make_run(store: Store, rows, metrics, responder=safety_responder) -> str:
    with JudgeServer(responder=responder) as s:
        cfg = {"model": "loopback", "provider": "compatible", "base_url": s.url, "max_retries": 0}
        return evaluate(rows, metrics, judge=cfg, store=store).run_id


def cards(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_safety_page_defect_rates_threshold_and_rows(home_store):
    rid = make_run(home_store, ROWS, ["violence", "protected_material", "indirect_attack"])
    at = app("pages/safety.py", run=rid, srow="1")
    c = cards(at)
    # violence: 4 and 7 above 3 among 5 scored rows; protected material 1 of 6; XPIA 1 of 6
    assert c["Violence defect rate"] == "40.0%"
    assert c["Protected material defect rate"] == "16.7%"
    assert c["Indirect attack (XPIA) defect rate"] == "16.7%"
    overview = at.dataframe[0].value
    intrusion = overview[overview["measure"] == "indirect_attack: intrusion"].iloc[0]
    # percentages with one decimal, as on the cards ("16.7%"): the table holds the rate in percent
    assert intrusion["defect_rate"] == pytest.approx(100 / 6) and intrusion["defects"] == 1
    levels = at.dataframe[1].value
    assert levels.loc["violence"].tolist() == [1, 2, 1, 1]  # Very low, Low, Medium, High
    # the threshold recomputes from stored severities: above 1 -> 2, 3, 4, 7
    at.slider(key="sev").set_value(1).run()
    assert cards(at)["Violence defect rate"] == "80.0%"
    rows = at.dataframe[3].value
    # the errored row's severity is a dash, not "None": the column is shown as text
    assert rows["violence severity"].tolist()[:6] == ["0", "2", "3", "4", "7", "–"]
    assert rows["violence level"].tolist()[:5] == ["Very low", "Low", "Low", "Medium", "High"]
    assert not [c for c in rows.columns if c.endswith("reason")]  # reasons are read in the row's detail
    assert rows["violence result"].tolist()[5] == "error"
    # the selected row (srow=1): one line per harm and label, its verdict in words, defects marked
    detail = at.dataframe[4].value
    assert detail["harm"].tolist() == ["Violence", "Protected material", "Indirect attack (XPIA)"]  # by name
    assert detail["verdict"].tolist() == ["no defect", "⚠ defect", "no defect"]  # row 1: protected material true
    assert detail["severity"].tolist()[0] == "0" and detail["level"].tolist() == ["Very low", "labelled true",
                                                                                   "labelled false"]
    assert detail["reason"].tolist()[0] == "violence severity 0"


def test_attacks_page_compares_two_runs(home_store):
    base = [{"id": k, "query": "q", "response": f"b {k} [violence:{v}]"} for k, v in zip("abcd", "0152")]
    attack = [{"id": k, "query": "q", "response": f"a {k} [violence:{v}]"} for k, v in zip("bcde", "6635")]
    base_id = make_run(home_store, base, ["violence"])
    attack_id = make_run(home_store, attack, ["violence"])
    at = app("pages/attacks.py", base=base_id, attack=attack_id)
    c = cards(at)
    assert (c["Paired rows"], c["Unpaired rows"]) == ("3", "2")
    # pairs b (1 -> 6), c (5 -> 6), d (2 -> 3): only b goes from below to above 3
    assert c["Violence direct-attack defect rate"] == "33.3%"
    table = at.dataframe[0].value
    attack_rate = table[(table["harm"] == "Violence") & (table["rate"] == "attack")].iloc[0]["defect_rate"]
    assert attack_rate == pytest.approx(200 / 3)  # in percent, shown "66.7%"
    assert [x.value for x in at.code] == ["a", "e"]  # unpaired ids, listed


def test_attacks_page_pairs_a_source_without_ids_with_its_attack_set(home_store):
    source = [{"query": f"q {k}", "response": f"b {k} [violence:{v}]"} for k, v in zip("abc", "152")]
    attack = [{**r, "response": r["response"].replace("b ", "a ").replace(f"[violence:{v}]", f"[violence:{w}]")}
              for r, v, w in zip(attack_records(source, "direct", 0), "152", "663")]
    assert [r["id"] for r in attack] == ["row-1", "row-2", "row-3"]  # the set names the source's rows
    base_id, attack_id = make_run(home_store, source, ["violence"]), make_run(home_store, attack, ["violence"])
    at = app("pages/attacks.py", base=base_id, attack=attack_id)
    c = cards(at)
    assert (c["Paired rows"], c["Unpaired rows"]) == ("3", "0")
    assert c["Violence direct-attack defect rate"] == "33.3%"  # row 1: 1 -> 6; row 2 was above 3 already


def test_attacks_page_takes_the_attack_set_run_as_the_attack_whichever_ran_first(home_store):
    """The page's own flow runs the generated attack set first ("Evaluate it"), then the source: the run of
    the set whose rows carry an attack is the attack run, not simply the newer one."""
    source = [{"query": f"q {k}", "response": f"b {k} [violence:{v}]"} for k, v in zip("abc", "152")]
    attack = [{**r, "response": r["response"].replace("b ", "a ").replace(f"[violence:{v}]", f"[violence:{w}]")}
              for r, v, w in zip(attack_records(source, "direct", 0), "152", "663")]
    attack_id = make_run(home_store, attack, ["violence"])  # first
    base_id = make_run(home_store, source, ["violence"])  # then the baseline: the newest run
    at = app("pages/attacks.py")
    assert (at.query_params["base"], at.query_params["attack"]) == (base_id, attack_id)
    assert cards(at)["Violence direct-attack defect rate"] == "33.3%"  # row 1: 1 -> 6 (swapped: 0%)


def test_attacks_page_says_what_cannot_be_paired_and_keeps_the_other_tab(home_store):
    rows = [{"id": "same", "query": "q", "response": f"r {k} [violence:1]"} for k in "ab"]  # an id twice
    base_id, attack_id = make_run(home_store, rows, ["violence"]), make_run(home_store, rows, ["violence"])
    at = app("pages/attacks.py", allow_errors=True, base=base_id, attack=attack_id)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "repeats id" in errors[0] and "--" not in errors[0]  # no command-line flag
    assert at.button(key="atk.go").label == "Generate attack set"  # the other tab is still drawn
    pair_by = next(b for b in at.selectbox if b.label == "Pair rows by")
    assert pair_by.options[0] == "id" and "query" in pair_by.options  # the columns both runs have


def test_attacks_page_generates_and_fills_a_set(home_store):
    app()  # seeds the samples
    did = next(d["id"] for d in home_store.list_datasets() if d["shape"] == "single")
    with JudgeServer(responder=lambda p, r: "TARGET REPLY") as target:
        at = app("pages/attacks.py", dataset=did)
        at.radio(key="atk.kind").set_value("indirect").run()
        at.toggle(key="atk.fill").set_value(True).run()
        at.text_input(key="atk.url").input(target.url).run()
        at.text_input(key="atk.model").input("app").run()
        at.button(key="atk.go").click().run()
        assert not at.exception and not at.error, [e.value for e in at.error]
        assert len(target.calls) == 31
    made = next(d for d in home_store.list_datasets() if "indirect attack · seed 0" in d["name"])
    ds = home_store.get_dataset(made["id"])
    assert all(r["response"] == "TARGET REPLY" and r["attack"] in r["context"] for r in ds.records)
    assert {r["attack_category"] for r in ds.records} == {"manipulated_content", "intrusion", "information_gathering"}
    assert "Saved as a new dataset (31 rows)" in at.success[0].value
    assert any("indirect attack · seed 0" in t.value for t in at.text)


def test_attacks_page_saves_nothing_when_the_target_fails(home_store):
    app()
    did = next(d["id"] for d in home_store.list_datasets() if d["shape"] == "single")
    before = len(home_store.list_datasets())
    with JudgeServer() as target:
        target.queue.extend([Action(status=400)] * 31)  # a client error is not retried
        at = app("pages/attacks.py", dataset=did)
        at.toggle(key="atk.fill").set_value(True).run()
        at.text_input(key="atk.url").input(target.url).run()
        at.text_input(key="atk.model").input("app").run()
        at.button(key="atk.go").click().run()
    assert "31 of 31 target calls failed; nothing was saved" in at.error[0].value
    assert "HTTP 400" in at.code[-1].value
    assert len(home_store.list_datasets()) == before


def test_new_evaluation_lists_the_safety_family(home_store):
    app()
    did = next(d["id"] for d in home_store.list_datasets() if d["shape"] == "single")
    at = app("pages/new.py", dataset=did)
    for name in ("hate_unfairness", "sexual", "violence", "self_harm", "protected_material", "indirect_attack"):
        assert not at.checkbox(key=f"new.metric.{name}").disabled
    assert "Risk and safety" in [h.value for h in at.subheader]


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed (scripts/setup.sh --dev)")
def test_browser_walks_the_safety_view(served_app, browser, tmp_path):  # noqa: F811
    url, store = served_app
    rows = [dict(r) for r in ROWS]

    def responder(prompt, request):
        out = safety_responder(prompt, request)
        return out.replace('"violence severity 7"', json.dumps(REASON))

    rid = make_run(store, rows, ["violence", "sexual", "protected_material", "indirect_attack"], responder)
    page = browser.new_page(viewport={"width": 1500, "height": 1600})
    page.goto(f"{url}/safety?run={rid}")
    settle(page, "Defect rates")
    expect_metric(page, "Violence defect rate", "40.0%")
    expect_metric(page, "Sexual content defect rate", "0.0%")
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    charts.nth(1).scroll_into_view_if_needed(timeout=30_000)  # defect rates and levels
    for k in (0, 1):
        charts.nth(k).locator("svg.marks").wait_for(timeout=30_000)
    assert "violence" in charts.first.locator(".role-axis-label text").all_text_contents()
    # the levels: a bar per harm, its four levels stacked (violence 0 2 3 4 7 -> 1 Very low, 2 Low, 1 Medium, 1 High)
    assert charts.nth(1).locator(".role-axis-label text").all_text_contents()[-2:] == ["violence", "sexual"]
    assert charts.nth(1).locator(".role-legend-label text").all_text_contents() == ["Very low", "Low", "Medium",
                                                                                     "High"]
    # drawn with a height (a fitted size once left the two bars 10 px under their legend)
    assert charts.nth(1).locator("g.mark-rect").first.bounding_box()["height"] > 40
    shot(page, "safety-1-view")
    # the threshold selector, from the URL: above 1 -> 4 of 5
    page.goto(f"{url}/safety?run={rid}&sev=1")
    settle(page, "Defect rates")
    expect_metric(page, "Violence defect rate", "80.0%")
    # a row's reasoning is text: the judge's Markdown and HTML come through literally
    page.goto(f"{url}/safety?run={rid}&srow=5")
    settle(page, "Row 5")
    # in the detail table's cell as written (the grid's copy of its cells' text)
    page.get_by_text(REASON, exact=True).first.wait_for(state="attached", timeout=30_000)
    assert page.locator("b", has_text="raw").count() == 0
    shot(page, "safety-2-row")


def test_safety_rows_come_a_page_at_a_time(home_store):
    rows = [{"id": f"p{i}", "query": "q", "response": f"r{i} [violence:{7 if i == 110 else 0}]"} for i in range(120)]
    rid = make_run(home_store, rows, ["violence"])
    at = app("pages/safety.py", run=rid)
    assert cards(at)["Violence defect rate"] == "0.8%"  # 1 of 120
    table = at.dataframe[-1].value
    assert len(table) == 100 and table["#"].tolist()[0] == 1
    at.number_input(key="spage").set_value(2).run()
    table = at.dataframe[-1].value
    assert table["#"].tolist() == list(range(101, 121))
    assert table.loc[table["#"] == 111, "violence severity"].item() == 7


def test_attacks_page_opens_a_pair_by_its_id_as_written_and_says_when_there_is_none(home_store):
    base = [{"id": k, "query": "q", "response": f"b [violence:{v}]"} for k, v in (("**x**", "1"), ("y", "0"))]
    attack = [{"id": k, "query": f"JB q {k}", "response": f"a [violence:{v}]"} for k, v in (("**x**", "6"), ("y", "0"))]
    base_id, attack_id = make_run(home_store, base, ["violence"]), make_run(home_store, attack, ["violence"])
    at = app("pages/attacks.py", allow_errors=True, base=base_id, attack=attack_id, urow="**x**")
    assert [h.value for h in at.subheader] == [r"Row \*\*x\*\*"]  # escaped: shown as written, not bold
    texts = [t.value for t in at.text]
    assert "JB q **x**" in texts and "a [violence:6]" in texts and "violence severity 6" in texts
    assert any("direct-attack defect" in e.value for e in at.error)
    at = app("pages/attacks.py", allow_errors=True, base=base_id, attack=attack_id, urow="nope")
    assert [e.value for e in at.error] == ["Row not found: the link names a pair (id nope) these two runs do not have."]
    assert not at.subheader


def test_a_page_of_safety_rows_reads_that_page_only(home_store):
    """bench/safety_page.py's first build (issue 35): a page of rows built every cell of the run and read each
    record with a query of its own. It reads the page's cells and records, one query each, and the same values."""
    from evaluators.read.view import open_view
    from evaluators.suites.safety import safety_rows

    rows = [{"id": f"p{i}", "query": f"q{i}", "response": f"r{i} [violence:{i % 8}]"} for i in range(30)]
    rid = make_run(home_store, rows, ["violence"])
    res = open_view(home_store, rid)
    asked = []
    read = home_store.dataset_records
    home_store.dataset_records = lambda did, idx: asked.append(list(idx)) or read(did, idx)
    try:
        page = safety_rows(res, 10, 20)
    finally:
        del home_store.dataset_records
    assert res._cols.all_cells is None  # no cell of the run outside the page was built
    assert asked == [list(range(10, 20))]  # the page's records in one read
    assert [r["#"] for r in page] == list(range(11, 21)) and [r["query"] for r in page] == [f"q{i}" for i in range(10, 20)]
    assert [r["violence severity"] for r in page] == [i % 8 for i in range(10, 20)]
