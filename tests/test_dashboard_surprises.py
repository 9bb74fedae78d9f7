"""Issue 24, "dead ends and surprises in the browser", through Streamlit's AppTest: each test fails
without its fix (the browser's side is in tests/test_surprises_browser.py)."""
from __future__ import annotations

import json

import pytest

from tests.apptest import app
from tests.test_dashboard_rest import sample_id

st_testing = pytest.importorskip("streamlit.testing.v1")
pytestmark = pytest.mark.usefixtures("fresh_caches")  # each test starts on empty Streamlit caches

KEY = "sk-typed-in-this-tab-0123456789"


def shown(at) -> str:
    """Everything the page shows as text, labels and values of inputs included."""
    parts = [e.value for kind in ("markdown", "caption", "text", "code", "error", "warning", "info", "success")
             for e in getattr(at, kind)]
    parts += [str(w.value) for w in at.text_input]
    return "\n".join(str(p) for p in parts)


# ---------------------------------------------------------------- 1. the judge's settings are kept
def test_judge_settings_are_kept_for_the_browser_session_the_key_in_memory_only(home_store, judge_server, caplog):
    app()
    did = sample_id(home_store)
    at = app("pages/new.py", dataset=did)
    at.checkbox(key="new.metric.coherence").check().run()
    at.text_input(key="judge.base_url").input(judge_server.url)
    at.text_input(key="judge.model").input("loopback")
    at.text_input(key="judge_api_key").input(KEY)
    at.number_input(key="judge.concurrency").set_value(3).run()
    # away to another page of the app and back, in the same tab (session)
    at.switch_page("pages/runs.py")
    at.run()
    at.switch_page("pages/new.py")
    at.query_params.update({"dataset": did})
    at.run()
    at.checkbox(key="new.metric.coherence").check().run()
    assert at.text_input(key="judge.base_url").value == judge_server.url
    assert at.text_input(key="judge.model").value == "loopback"
    assert at.text_input(key="judge_api_key").value == KEY
    assert at.number_input(key="judge.concurrency").value == 3
    assert any(m.label == "Judge calls" and m.value == "31" for m in at.metric)  # the judge is complete again
    # the key lives in this session's memory only: not in the URL, the store, or a log line
    assert KEY not in json.dumps(at.query_params.to_dict() if hasattr(at.query_params, "to_dict") else dict(at.query_params))
    assert not home_store.list_runs()
    assert KEY not in caplog.text
    # and a new browser session starts blank
    fresh = app("pages/new.py", dataset=did)
    fresh.checkbox(key="new.metric.coherence").check().run()
    assert fresh.text_input(key="judge.model").value == "" and fresh.text_input(key="judge_api_key").value == ""


# ---------------------------------------------------------------- 2. the preview and checks follow the mapping
ROWS = [{"question": f"q{i}", "answer": f"a{i}", "rewrite": f"better a{i}", "passage": f"doc {i}"} for i in range(3)]


def test_the_column_mapping_drives_the_preview_the_checks_and_what_is_saved(home_store):
    at = app("pages/datasets.py")
    data = "".join(json.dumps(r) + "\n" for r in ROWS).encode()
    at.file_uploader(key="datasets.upload").set_value(("mapped.jsonl", data, "application/octet-stream")).run()
    fid = next(s.key for s in at.selectbox if s.key.endswith(".response")).rsplit(".", 2)[1]

    def field(name):
        return at.selectbox(key=f"datasets.map.{fid}.{name}")

    def preview():
        return next(d.value for d in at.dataframe if d.value.index.name == "row")

    assert (field("query").value, field("response").value, field("context").value) == ("question", "answer", "passage")
    assert any("3 rows, single shape, all checks passed" in s.value for s in at.success)
    # the preview shows each field under the column it is read from, then the columns left unread
    assert list(preview().columns) == ["query ← question", "response ← answer", "context ← passage", "rewrite (not used)"]
    assert list(preview()["response ← answer"]) == ["a0", "a1", "a2"]

    field("response").set_value("(none)").run()  # no response: questions only, a model can answer them (issue 36)
    assert any("Questions only" in i.value and "Generate answers with a model" in i.value for i in at.info)
    assert [b for b in at.button if b.key == "datasets.save"]
    assert not [c for c in preview().columns if c.startswith("response")]
    assert "answer (not used)" in preview().columns

    field("response").set_value("rewrite").run()  # another column: the preview reads it
    assert any("3 rows, single shape, all checks passed" in s.value for s in at.success)
    assert list(preview()["response ← rewrite"]) == ["better a0", "better a1", "better a2"]

    field("context").set_value("(none)").run()  # a detected field left out stays out
    assert "passage (not used)" in preview().columns
    assert any("all checks passed" in s.value for s in at.success)
    at.button(key="datasets.save").click().run()
    saved = next(d for d in home_store.list_datasets() if d["name"] == "mapped.jsonl")
    assert home_store.get_dataset(saved["id"]).mapping == {"query": "question", "response": "rewrite"}


def test_a_field_mapped_to_no_column_is_not_read_even_when_detected():
    from evaluators.data.loading import inspect_file

    data = "".join(json.dumps(r) + "\n" for r in ROWS).encode()
    assert inspect_file(data, "m.jsonl").mapping == {"query": "question", "response": "answer", "context": "passage"}
    left_out = inspect_file(data, "m.jsonl", {"context": None})
    assert left_out.dataset.mapping == {"query": "question", "response": "answer"} and left_out.detected == "custom"
    none = inspect_file(data, "m.jsonl", {"response": None})  # questions only: read (a model may answer them)
    assert none.dataset.mapping == {"query": "question", "context": "passage"} and none.dataset.questions_only()
    no_query = inspect_file(data, "m.jsonl", {"response": None, "query": None})
    assert no_query.dataset is None and "no response column found" in no_query.problems[0].message


# ---------------------------------------------------------------- 3. a selected row the filters leave out
def test_the_detail_pane_says_when_the_filters_leave_its_row_out(home_store, monkeypatch):
    from tests.test_results_page import known_results, stored_run

    app()
    rid = stored_run(home_store, known_results())  # coherence 5 4 3 2 1 5 4 2 1 3, threshold 3
    at = app("pages/results.py", run=rid, view="Rows", metric="coherence", row="1")
    assert not [i for i in at.info if "filtered out" in i.value]
    assert any(s.value == "Row 1" for s in at.subheader)
    at = app("pages/results.py", run=rid, view="Rows", metric="coherence", verdict="fail", row="1")  # row 1 scores 5
    assert list(at.dataframe[0].value["#"]) == [4, 5, 8, 9]
    note = [i.value for i in at.info if "filtered out" in i.value]
    assert note and note[0].startswith("Row 1 is filtered out: it does not match the filters or the search above")
    assert any(s.value == "Row 1" for s in at.subheader)  # the detail stays, said to be outside the table
    at = app("pages/results.py", run=rid, view="Rows", metric="coherence", q="question 7", row="1")  # a search
    assert list(at.dataframe[0].value["#"]) == [8]
    assert [i for i in at.info if i.value.startswith("Row 1 is filtered out")]
    # a row that matches, on another page of the table: said so, with a button to its page
    monkeypatch.setattr("ui.rows.PAGE_ROWS", 3)
    at = app("pages/results.py", run=rid, view="Rows", metric="coherence", row="8")
    assert list(at.dataframe[0].value["#"]) == [1, 2, 3]
    assert any(c.value == "Row 8 matches the filters; it is on page 3 of the table." for c in at.caption)
    at.button(key="rows.goto").click().run()
    assert list(at.dataframe[0].value["#"]) == [7, 8, 9] and at.query_params["page"] == "3"
    assert not [c for c in at.caption if "matches the filters" in c.value]


# ---------------------------------------------------------------- 4. a share link opens the view
def test_a_share_link_opens_the_tab_it_was_taken_from_encoded(home_store):
    from urllib.parse import parse_qs, urlsplit

    from tests.test_results_page import known_results, stored_run

    app()
    rid = stored_run(home_store, known_results())
    at = app("pages/results.py", run=rid, view="Share & export", q="answer & more")  # straight to the Share tab

    def link():
        return next(c.value for c in at.code if "run=" in c.value)

    assert at.radio(key="share.opens").value == "Metrics"  # no tab before it: the first one
    assert "q=answer%20%26%20more" in link() and "view=" not in link()  # one value, the Metrics tab (no view)
    at.radio(key="share.opens").set_value("Rows").run()
    assert parse_qs(urlsplit(link()).query) == {"run": [rid], "q": ["answer & more"], "view": ["Rows"]}
    assert any(c.value.startswith("This link opens the Rows tab of this run") for c in at.caption)


# ---------------------------------------------------------------- 5. one colour language on the overview
def test_the_overview_speaks_one_colour_language_and_its_legend_names_it(home_store):
    from evaluators.read.charts_overview import FAIL, PASS, UNSURE
    from tests.test_results_page import figure, known_results, overview_rows, stored_run

    app()
    rid = stored_run(home_store, known_results())
    at = app("pages/results.py", run=rid)
    rates, counts = figure(at, "overview")["hconcat"]
    colour = rates["layer"][0]["encoding"]["color"]
    meanings = {"meets the target": PASS, "too close to tell": UNSURE, "below the target": FAIL,
                "no scored rows": "#9e9e9e"}
    # the bars' colours come from a scale whose legend names each one (none was drawn before)
    assert dict(zip(colour["scale"]["domain"], colour["scale"]["range"])) == meanings
    assert colour["field"] == "meaning" and colour["legend"] and colour["title"] == "Rate against the target"
    # coherence 31-83% straddles the 80% target, f1 11-60% is below it (see test_results_page)
    assert [(r["meaning"], r["colour"]) for r in overview_rows(at)][:2] == [("too close to tell", UNSURE),
                                                                         ("below the target", FAIL)]
    # the row counts beside them use none of those colours: red means "below the target", not "errored"
    rows = dict(zip(counts["encoding"]["color"]["scale"]["domain"], counts["encoding"]["color"]["scale"]["range"]))
    assert set(rows) == {"scored", "errored", "skipped", "pending"}
    assert not set(rows.values()) & {PASS, FAIL, UNSURE}
    assert figure(at, "overview")["resolve"]["legend"]["color"] == "independent"  # two legends, one each


# ---------------------------------------------------------------- 6. the rows table uses the width
def test_the_rows_table_shows_each_metric_in_one_narrow_column_then_the_text(home_store):
    import pyarrow as pa

    from evaluators.store.schema import Result
    from tests.test_results_page import known_results, stored_run

    app()
    results = [r for r in known_results() if not (r.metric == "coherence" and r.row_idx == 4)]
    results.append(Result(4, "coherence", 0, "error", error="no verdict"))
    rid = stored_run(home_store, results)
    at = app("pages/results.py", run=rid, view="Rows")
    table = at.dataframe[0]
    # the table is not squeezed into a column beside the detail: it is the tab's full width
    assert at.columns and not [d for c in at.columns for d in c.dataframe if d.proto.id == table.proto.id]
    # a column per metric (its verdict in words inside it), narrow, then the query and the response
    assert list(table.proto.column_order) == ["#", "coherence", "f1_score", "violence", "protected_material",
                                              "query", "response"]
    widths = json.loads(table.proto.columns)
    assert widths["#"]["width"] == 44 and all(widths[m]["width"] <= 170 for m in ("coherence", "f1_score", "violence"))
    assert sum(widths[c]["width"] for c in list(table.proto.column_order)[:5]) <= 520  # query starts by 520 px
    shown = pa.ipc.open_stream(table.proto.arrow_data.styler.display_values).read_pandas()
    # scores 5 4 3 2 (error) ..., f1 0.421348, violence 0 1 4, protected material false: as a reader reads them
    assert list(shown["coherence"][:5]) == ["5 · pass", "4 · pass", "3 · pass", "2 · fail", "error"]
    assert list(shown["f1_score"][:2]) == ["0.4213 · fail", "0.9 · pass"]
    assert list(shown["violence"][:3]) == ["0 · pass", "1 · pass", "4 · fail"]
    assert shown["protected_material"][9] == "true · fail"
    assert list(table.value["coherence verdict"][:5]) == ["pass", "pass", "pass", "fail", "error"]  # kept in the data


# ---------------------------------------------------------------- 7. the docs name the controls as the UI does
# Quoted names in the dashboard's pages of the docs that are not on screen: sections of documents they point to.
SECTION_REFERENCES = {"Reading a run", "Reviewing a run", "Where each target stands"}


def readme_names() -> set[str]:
    """Every "quoted" or **bold** name where the docs tell a reader what to click: the README's "Five things to try
    first", the dashboard's pages (The dashboard with Reading a run, Reviewing a run, Sign-in), Risk and safety's
    and Red teaming's "In the dashboard", WildBench's "Dashboard."; leaving out code, the bold lead of a list item or a paragraph
    ("**Home** (`/`) —", "**Named judges.**") and inline code."""
    import re

    from tests.conftest import ROOT

    def read(name: str) -> str:
        return re.sub(r"```.*?```", "", (ROOT / name).read_text(), flags=re.S)

    def section(text: str, start: str, end: str) -> str:
        i = text.index(start)
        m = re.compile(end, re.M).search(text, i + len(start))
        return text[i:m.start() if m else len(text)]

    parts = [section(read("README.md"), "## Five things to try first", r"^## "),
             read("docs/dashboard.md"), read("docs/review.md"), read("docs/sign-in.md"),
             section(read("docs/safety.md"), "## In the dashboard", r"^##? "),
             section(read("docs/redteam.md"), "## In the dashboard", r"^##? "),
             section(read("docs/wildbench.md"), "**Dashboard.**", r"^\s*$")]
    names = set()
    for part in parts:
        for line in part.splitlines():
            line = re.sub(r"`[^`]*`", "", line)
            names |= set(re.findall(r'"([^"]{2,60})"', line))
            for m in re.finditer(r"\*\*([^*]{2,60})\*\*", line):
                if line[:m.start()].strip() not in ("-", "") and not m.group(1).endswith((".", ":")):
                    names.add(m.group(1))
    return names


def ui_texts() -> set[str]:
    """Every text the dashboard's code writes: string constants and the fixed start of f-strings."""
    import ast

    from tests.conftest import ROOT

    out = set()
    for path in [ROOT / "app.py", *(ROOT / "pages").glob("*.py"), *(ROOT / "ui").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.add(node.value.lstrip("#").strip())  # a heading's text without its Markdown
            elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
                out.add(node.values[0].value)
    return out


def test_every_control_the_readme_names_is_named_so_in_the_dashboard(home_store):
    names = readme_names()
    assert sorted(names - SECTION_REFERENCES - ui_texts()) == []  # "Try it on the sample" (the button: "Evaluate...")
    assert {"Evaluate the sample", "Filter", "Test connection", "Retry failed rows", "Resume run",
            "Show only differences", "Share & export"} <= names  # the extraction finds what it is for
    # and on screen, where it is said to be
    at = app()
    assert at.button(key="home.sample").label == "Evaluate the sample"


# ---------------------------------------------------------------- 8. a checkbox does not re-estimate the run
def test_a_checkbox_estimates_only_a_judge_metric_not_estimated_yet(home_store, judge_server, monkeypatch):
    import evaluators.api as api

    calls = []

    def counted(store, ds, spec):
        calls.append(list(spec.metrics))
        return real(store, ds, spec)

    real = api.estimate_run
    monkeypatch.setattr(api, "estimate_run", counted)
    app()
    at = app("pages/new.py", dataset=sample_id(home_store))
    at.checkbox(key="new.metric.f1_score").check().run()
    assert calls == []  # classic metrics only: nothing to estimate (every rerun walked every row before)
    at.checkbox(key="new.metric.coherence").check().run()
    at.text_input(key="judge.base_url").input(judge_server.url)
    at.text_input(key="judge.model").input("loopback").run()
    assert calls == [["coherence"]] and {m.label: m.value for m in at.metric}["Judge calls"] == "31"
    for metric in ("bleu", "rouge"):  # classic checkboxes, the judge given: the estimate is read, not made
        at.checkbox(key=f"new.metric.{metric}").check().run()
    at.number_input(key="new.th.coherence").set_value(4.0).run()  # a threshold changes no prompt
    assert calls == [["coherence"]]
    at.checkbox(key="new.metric.fluency").check().run()  # a new judge metric: that one only
    assert calls == [["coherence"], ["fluency"]] and {m.label: m.value for m in at.metric}["Judge calls"] == "62"
    at.checkbox(key="new.metric.fluency").uncheck().run()
    at.checkbox(key="new.metric.fluency").check().run()
    assert len(calls) == 2 and {m.label: m.value for m in at.metric}["Judge calls"] == "62"
    at.number_input(key="judge.max_tokens").set_value(400).run()  # another judge setting: other prompts' keys
    assert sorted(map(tuple, calls[2:])) == [("coherence",), ("fluency",)]


def test_a_big_dataset_is_estimated_in_the_background_while_the_page_answers(home_store, judge_server, monkeypatch):
    import threading

    import evaluators.api as api

    release = threading.Event()
    real = api.estimate_run

    def slow(store, ds, spec):
        release.wait(30)
        return real(store, ds, spec)

    monkeypatch.setattr(api, "estimate_run", slow)
    monkeypatch.setattr("ui.loaders.INLINE_ROWS", 10)  # the sample's 31 rows count as big here
    app()
    at = app("pages/new.py", dataset=sample_id(home_store))
    at.checkbox(key="new.metric.coherence").check().run()
    at.text_input(key="judge.base_url").input(judge_server.url)
    at.text_input(key="judge.model").input("loopback").run()
    assert any("Working out the judge calls" in c.value for c in at.caption)  # drawn without waiting for it
    assert not [m for m in at.metric if m.label == "Judge calls"] and at.button(key="new.start")
    release.set()
    from ui import loaders

    for job in list(loaders._estimates().jobs.values()):
        job.result(30)
    at.run()
    assert {m.label: m.value for m in at.metric}["Judge calls"] == "31"
    assert not [c for c in at.caption if "Working out" in c.value]


# ---------------------------------------------------------------- found on the walk: two datasets of one name
@pytest.mark.usefixtures("queue_worker")  # PostgreSQL: the run goes to the job queue
def test_new_evaluation_starts_on_the_dataset_the_link_names_when_two_read_alike(home_store):
    from evaluators import load_dataset
    from tests.conftest import wait_for_run

    rows = [{"q": f"q{i}", "a": f"a{i}", "b": f"b{i}", "gt": f"a{i}"} for i in range(3)]
    # one file saved with two mappings: two datasets of one name, size and shape
    first = home_store.save_dataset(load_dataset(rows, {"query": "q", "response": "a", "ground_truth": "gt"}, name="x.jsonl"))
    second = home_store.save_dataset(load_dataset(rows, {"query": "q", "response": "b", "ground_truth": "gt"}, name="x.jsonl"))
    for wanted in (first, second):
        at = app("pages/new.py", dataset=wanted)
        at.checkbox(key="new.metric.f1_score").check().run()
        at.button(key="new.start").click().run()
        run = home_store.list_runs()[0]
        assert run["dataset_id"] == wanted  # the second ran on the first before: Streamlit read the choice by its text
        wait_for_run(home_store, run["id"])


def test_a_run_that_just_ended_counts_on_jailbreak_attacks(home_store):
    from tests.test_safety_dashboard import make_run

    base = [{"id": k, "query": "q", "response": f"b {k} [violence:{v}]"} for k, v in zip("abc", "015")]
    attack = [{"id": k, "query": "q", "response": f"a {k} [violence:{v}]"} for k, v in zip("abc", "665")]
    base_id, attack_id = make_run(home_store, base, ["violence"]), make_run(home_store, attack, ["violence"])
    home_store.update_run(attack_id, status="running")  # still going when the page lists the runs
    at = app("pages/attacks.py")
    assert any("Two completed runs" in i.value for i in at.info)
    home_store.update_run(attack_id, status="completed")  # it ends; the list the page read is 2 s fresh
    at = app("pages/attacks.py", base=base_id, attack=attack_id)
    assert not any("Two completed runs" in i.value for i in at.info)
    assert {m.label: m.value for m in at.metric}["Violence direct-attack defect rate"] == "66.7%"  # a and b of a, b, c
