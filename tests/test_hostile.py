"""The hostile-input corpus (tests/hostile/) through the engine, the CLI, AppTest and a real browser upload.

Each refused file must give problems naming file, row and field (where there is one), no traceback,
nothing stored, and the app must take a valid upload afterwards. The 50 MB single field and the
over-limit upload are generated into tmp_path, never committed.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluators.cli import main as cli
from evaluators.data.loading import inspect_file, load_dataset, upload_name
from evaluators.core.errors import DataValidationError
from evaluators.store.store import Store
from tests.browser import ARGS, CHROMIUM, needs_chromium, settle, start_dashboard, stop
from tests.conftest import ROOT, default_store, env_for_subprocess

CORPUS = ROOT / "tests" / "hostile"
ROLES = "role must be one of assistant, developer, system, tool, user; this message has no role"
# file -> every problem it must produce: (row, field, words of the message). Row 0: the whole file.
REFUSED = {
    "broken_json.jsonl": [(2, "", "broken JSON line: Expecting ',' delimiter")],
    "list_as_text.jsonl": [(2, "response", "response must be text, got a list")],
    "object_as_text.jsonl": [(3, "query", "query must be text, got an object")],
    "binary.jsonl": [(0, "", "binary data (a NUL byte at offset")],
    "utf16_bom.jsonl": [(0, "", "the file is UTF-16 text (byte-order mark ff fe); save it as UTF-8")],
    "utf16be_bom.csv": [(0, "", "the file is UTF-16 text (byte-order mark fe ff); save it as UTF-8")],
    "utf16le_nobom.csv": [(0, "", "looks like UTF-16 text without a byte-order mark (LE); save it as UTF-8")],
    "csv_extra_values.csv": [(2, "", "1 more value(s) than header columns")],
    "csv_unclosed_quote.csv": [(3, "", "broken CSV: unexpected end of data; a quoted value starting in this row is never closed")],
    "messages_no_roles.jsonl": [(1, "messages", f"messages[0]: {ROLES}"), (1, "messages", f"messages[1]: {ROLES}"),
                                (1, "messages", "the conversation has no assistant message to evaluate")],
    "empty.jsonl": [(0, "", "the file is empty (0 bytes)")],
    "zip_renamed.jsonl": [(0, "", "this is a ZIP archive (or an .xlsx/.docx file), not JSON lines text")],
    "deep_nesting.jsonl": [(2, "meta", "nested more than 64 levels deep"), (3, "", "nested more than 64 levels deep")],
    "deep_nesting.json": [(0, "", "nested more than 64 levels deep")],
    "huge_number.jsonl": [(2, "", "a number with more than 4,300 digits")],
    "nested_response.parquet": [(1, "response", "response must be text, got an object"),
                                (2, "response", "response must be text, got an object"),
                                (3, "response", "missing response")],
}
# file -> rows as they must load (values written by hand from the files' bytes)
PARIS = {"query": "What is the capital of France?", "response": "Paris.", "ground_truth": "Paris"}
ACCEPTED = {
    "number_as_text.jsonl": [PARIS, {"query": "6 x 7?", "response": "42", "ground_truth": "42.5"}],
    "bom_utf8.jsonl": [PARIS, {**PARIS, "query": "Où est la tour Eiffel ?"}],
    "csv_embedded.csv": [{"query": "line one\nline two", "response": 'He said "hi", then left.', "ground_truth": "a, b and c"},
                         {"query": "plain", "response": "=1+2", "ground_truth": 'multi\r\nline "quoted"'}],
    "unicode_line_separators.jsonl": [PARIS, {**PARIS, "response": "one\u2028two\u2029three\x85four\x0cfive"}],
    "nested_extra.parquet": [{"query": t, "response": t, "ground_truth": t, "meta": m} for t, m in
                             [("one", [{"k": "a", "v": 1}]), ("two", []), ("three", [{"k": "b", "v": 2}, {"k": "c", "v": 3}])]],
}


def expected_parts(name: str) -> list[tuple[str, str]]:
    """What the CLI's one line must say for a refused file: (file, row, field) then the words, per problem."""
    return [(name + (f", row {row}" if row else "") + (f", field '{field}'" if field else "") + ": ", words)
            for row, field, words in REFUSED[name]]


def check_problems(problems, name: str) -> None:
    want = REFUSED[name]
    assert [(p.source, p.row, p.field) for p in problems] == [(name, r, f) for r, f, _ in want]
    for p, (_, _, words) in zip(problems, want):
        assert words in p.message, (p.message, words)


def test_the_corpus_is_complete():
    on_disk = {p.name for p in CORPUS.iterdir() if p.name != "make_corpus.py" and not p.name.startswith(".")}
    assert on_disk == set(REFUSED) | set(ACCEPTED)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_engine_refuses_with_row_and_field(name):
    with pytest.raises(DataValidationError) as e:
        load_dataset(CORPUS / name)
    check_problems(e.value.problems, name)
    insp = inspect_file((CORPUS / name).read_bytes(), name)  # the dashboard's path: same problems, no raise
    assert insp.dataset is None
    check_problems(insp.problems, name)


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_engine_accepts_and_reads_exact_values(name):
    ds = load_dataset(CORPUS / name)
    assert ds.records == ACCEPTED[name]
    assert all(isinstance(ds.canonical(i)[f], str) for i in range(len(ds)) for f in ("query", "response", "ground_truth"))


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_cli_refuses_in_one_line_and_stores_nothing(name, tmp_path, capsys, new_store_url):
    db = new_store_url("evals")
    # a run checks the fields its metrics read: a bad query refuses a run that reads it (coherence's judge is never
    # called: the data is refused first), not an f1_score run (see test_a_bad_column_no_metric_reads_is_left_out)
    metrics = ["--metrics", "coherence", "--judge-base-url", "http://127.0.0.1:9/v1"] if name == "object_as_text.jsonl" \
        else ["--metrics", "f1_score"]
    code = cli.main(["run", str(CORPUS / name), *metrics, "--out", str(tmp_path / "out"), "--db", db])
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("error: ")
    parts = expected_parts(name)
    starts = []
    for where, _ in parts:  # every problem, in row order, on the one line
        starts.append(err.index(where, starts[-1] + 1 if starts else 0))
    for (where, words), a, b in zip(parts, starts, starts[1:] + [len(err)]):
        assert words in err[a:b], (words, err[a:b])
    assert Store(db).list_datasets() == [] and not (tmp_path / "out" / "rows.jsonl").exists()


def test_a_bad_column_no_metric_reads_is_left_out(tmp_path, capsys, new_store_url):
    out = tmp_path / "out"
    code = cli.main(["run", str(CORPUS / "object_as_text.jsonl"), "--metrics", "f1_score", "--out", str(out), "--quiet",
                     "--db", new_store_url("evals")])
    assert code == cli.EXIT_OK, capsys.readouterr().err
    rows = [json.loads(x) for x in (out / "rows.jsonl").read_text(encoding="utf-8").split("\n") if x]
    assert rows[2]["inputs.query"] == {"text": "q"}  # as the file wrote it
    assert [r["outputs.f1_score.f1_score"] for r in rows] == [1.0, 1.0, 0.0]  # "Paris." vs "Paris" twice; "r" vs "g"


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_cli_runs_accepted_files(name, tmp_path, capsys, new_store_url):
    out = tmp_path / "out"
    code = cli.main(["run", str(CORPUS / name), "--metrics", "f1_score", "--out", str(out), "--quiet",
                     "--db", new_store_url("evals")])
    assert code == cli.EXIT_OK, capsys.readouterr().err
    # split on "\n" only: str.splitlines() would also split at a U+2028 inside a JSON string
    rows = [json.loads(x) for x in (out / "rows.jsonl").read_text(encoding="utf-8").split("\n") if x]
    assert [r["inputs.response"] for r in rows] == [r["response"] for r in ACCEPTED[name]]


@pytest.fixture(scope="module")
def fifty_mb_field(tmp_path_factory) -> Path:
    """Row 2 holds one 50 MB response (varied words, not one repeated byte); never committed."""
    words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor".split()
    text = " ".join(words[(i * 7) % len(words)] for i in range(9_000_000))[: 50 * 2**20]
    p = tmp_path_factory.mktemp("big") / "fifty_mb_field.jsonl"
    with p.open("w") as f:
        f.write(json.dumps({"query": "q", "response": "r", "ground_truth": "g"}) + "\n")
        f.write(json.dumps({"query": "q", "response": text, "ground_truth": "g"}) + "\n")
    return p


def test_fifty_mb_field_through_the_real_cli(fifty_mb_field, tmp_path, new_store_url):
    db = new_store_url("evals")
    p = subprocess.run([sys.executable, "-m", "evaluators", "run", str(fifty_mb_field), "--metrics", "f1_score",
                        "--out", str(tmp_path / "out"), "--db", db], cwd=ROOT, capture_output=True, text=True,
                       env=env_for_subprocess(), timeout=120)
    assert p.returncode == 2, p.stderr
    assert p.stderr == ("error: 1 problem(s) in the data: fifty_mb_field.jsonl, row 2, field 'response': "
                        f"{50 * 2**20:,} characters; at most 4,000,000 are accepted in one field\n")
    assert Store(db).list_datasets() == []


@pytest.mark.parametrize("name", ["zip_renamed.jsonl", "deep_nesting.json", "utf16_bom.jsonl"])
def test_real_cli_subprocess(name, tmp_path):
    p = subprocess.run([sys.executable, "-m", "evaluators", "run", str(CORPUS / name), "--metrics", "f1_score",
                        "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True,
                       env=env_for_subprocess(), timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.splitlines()
    where, words = expected_parts(name)[0]
    assert len(lines) == 1 and lines[0].startswith(f"error: 1 problem(s) in the data: {where}") and words in lines[0]


def test_upload_size_is_limited_by_the_engine(monkeypatch):
    monkeypatch.setenv("EVAL_MAX_UPLOAD_MB", "1")
    row = b'{"query": "q", "response": "r"}\n'
    at_limit = row * (2**20 // len(row))
    assert inspect_file(at_limit, "ok.jsonl").dataset is not None
    over = at_limit + row * 40
    insp = inspect_file(over, "big.jsonl")
    assert insp.dataset is None and [str(p) for p in insp.problems] == [
        f"big.jsonl: the file is {len(over) / 2**20:,.1f} MB; uploads are limited to 1 MB (EVAL_MAX_UPLOAD_MB)"]
    with pytest.raises(DataValidationError, match="uploads are limited to 1 MB"):
        load_dataset(over, name="big.jsonl")


@pytest.mark.parametrize("raw,shown", [("../../evil.jsonl", "evil.jsonl"), ("..\\..\\evil.jsonl", "evil.jsonl"),
                                       ("/etc/passwd.csv", "passwd.csv"), ("..", "upload"), ("a\x00b\n.csv", "ab.csv")])
def test_an_upload_name_is_text_never_a_path(raw, shown):
    assert upload_name(raw) == shown


# ------------------------------------------------------------------ the dashboard (AppTest)

@pytest.fixture
def home_store(tmp_path) -> Store:
    return default_store(tmp_path / "evalhome")


@pytest.fixture
def datasets_page():
    st_testing = pytest.importorskip("streamlit.testing.v1")
    import streamlit as st

    st.cache_resource.clear()
    st.cache_data.clear()
    at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("pages/datasets.py")
    at.run()
    yield at
    st.cache_resource.clear()


def upload(at, name: str, data: bytes):
    at.file_uploader(key="datasets.upload").set_value((name, data, "application/octet-stream")).run()
    assert not at.exception, [e.value for e in at.exception]
    shown = " ".join(str(getattr(e, "value", "")) for e in [*at.markdown, *at.text, *at.caption, *at.error, *at.success])
    assert "Traceback" not in shown and "Something went wrong" not in shown
    return at


def problem_rows(at) -> list[tuple]:
    table = next(d.value for d in at.dataframe if "problem" in d.value.columns)
    return [(int(r) if r != "" else 0, f, p) for r, f, p in zip(table["row"], table["field"], table["problem"])]


def test_dashboard_refuses_the_corpus_stores_nothing_and_stays_up(datasets_page, home_store, fifty_mb_field):
    at = datasets_page
    before = home_store.list_datasets()
    files = [(n, (CORPUS / n).read_bytes()) for n in sorted(REFUSED)]
    files.append(("fifty_mb_field.jsonl", fifty_mb_field.read_bytes()))
    for name, data in files:
        upload(at, name, data)
        assert any(" found; nothing was saved" in e.value for e in at.error), name
        assert not [b for b in at.button if b.key == "datasets.save"], name
        got = problem_rows(at)
        want = REFUSED.get(name) or [(2, "response", f"{50 * 2**20:,} characters")]
        assert [(r, f) for r, f, _ in got] == [(r, f) for r, f, _ in want], name
        assert all(w in p for (_, _, p), (_, _, w) in zip(got, want)), name
        assert home_store.list_datasets() == before, name
    # the app is still up: a valid upload is checked and saved
    upload(at, "number_as_text.jsonl", (CORPUS / "number_as_text.jsonl").read_bytes())
    assert any("2 rows, single shape, all checks passed" in s.value for s in at.success)
    at.button(key="datasets.save").click().run()
    saved = [d for d in home_store.list_datasets() if d["name"] == "number_as_text.jsonl"]
    assert len(saved) == 1
    assert home_store.get_dataset(saved[0]["id"]).records == ACCEPTED["number_as_text.jsonl"]


def test_dashboard_upload_limit_and_evil_name(datasets_page, home_store, monkeypatch, tmp_path):
    at = datasets_page
    monkeypatch.setenv("EVAL_MAX_UPLOAD_MB", "1")
    at.run()
    assert "up to 1 MB" in at.file_uploader(key="datasets.upload").label
    big = b'{"query": "q", "response": "r"}\n' * 40_000
    upload(at, "big.jsonl", big)
    assert problem_rows(at) == [(0, "", f"the file is {len(big) / 2**20:,.1f} MB; uploads are limited to 1 MB (EVAL_MAX_UPLOAD_MB)")]
    # a name that is a path: shown and stored as its last part, and no file is written anywhere
    watched = [ROOT, ROOT.parent, tmp_path, tmp_path.parent, tmp_path.parent.parent, Path.cwd(), Path.cwd().parent]
    upload(at, "../../evil.jsonl", b'{"query": "q", "response": "r"}\n')
    assert at.text_input(key="datasets.name").value == "evil.jsonl"
    at.button(key="datasets.save").click().run()
    assert any(d["name"] == "evil.jsonl" for d in home_store.list_datasets())
    assert not [d for d in watched if (d / "evil.jsonl").exists()]


def test_preview_rows_carry_the_file_row_number(datasets_page):
    # blank lines 3 and 30, a problem on line 27 (beyond the first 20 previewed rows)
    lines = [json.dumps({"query": f"q{n}", "response": f"r{n}"}) for n in range(1, 32)]
    lines[2] = lines[29] = ""
    lines[26] = json.dumps({"query": "q27", "response": ["bad"]})
    at = upload(datasets_page, "gaps.jsonl", ("\n".join(lines) + "\n").encode())
    assert problem_rows(at) == [(27, "response", "response must be text, got a list")]
    preview = at.dataframe[0].value
    assert preview.index.name == "row"
    assert list(preview.index) == [1, 2] + list(range(4, 22)) + [27]
    assert preview.loc[27, "response"] == '["bad"]' and preview.loc[4, "query"] == "q4"


def test_csv_context_column_is_mapped_and_numbers_shown_as_text(datasets_page):
    at = upload(datasets_page, "rag.csv", b"question,answer,context\nWhere?,Paris,Paris is in France\n")
    assert at.selectbox(key=[s.key for s in at.selectbox if s.key.endswith(".context")][0]).value == "context"
    assert any("1 row, single shape, all checks passed" in s.value for s in at.success)
    at = upload(at, "mixed.jsonl", b'{"query": "q", "response": 42, "n": 1}\n{"query": "q", "response": "text", "n": "one"}\n')
    preview = at.dataframe[0].value
    assert list(preview["response"]) == ["42", "text"] and list(preview["n (not used)"]) == ["1", "one"]


# ------------------------------------------------------------------ a real browser upload

SHOTS = ROOT / "artifacts" / "screenshots"


@pytest.fixture
def served_app(tmp_path):
    home = tmp_path / "evalhome"
    proc, url = start_dashboard(home, stderr=subprocess.PIPE)
    yield url, default_store(home), proc
    stop(proc)


@needs_chromium
def test_browser_upload_of_hostile_files(served_app, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    url, store, proc = served_app
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1400})
        page.goto(url + "/datasets")
        settle(page, "Saved datasets")
        before = len(store.list_datasets())
        dropzone = page.locator('[data-testid="stFileUploaderDropzoneInput"]')
        for name in ["zip_renamed.jsonl", "binary.jsonl", "utf16_bom.jsonl", "messages_no_roles.jsonl",
                     "deep_nesting.jsonl", "nested_response.parquet"]:
            dropzone.set_input_files(str(CORPUS / name))  # replaces the previous file
            settle(page, f"{name} · read as ")
            settle(page, "found; nothing was saved.")
            page.locator('[data-testid="stDataFrame"]').filter(has_text="problem").first.wait_for()
            text = page.locator('[data-testid="stMain"]').inner_text()
            n = len(REFUSED[name])
            assert f"{n} {'problem' if n == 1 else 'problems'} found; nothing was saved." in text, name
            assert "Traceback" not in text and "Something went wrong" not in text
            assert page.get_by_role("button", name="Save dataset").count() == 0
            assert len(store.list_datasets()) == before
            if name == "deep_nesting.jsonl":  # problems beside the preview rows they name
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / "hostile-upload.png"), full_page=True)
        # a path as the file name, then a valid file: the app is up and saves it under its last name part
        dropzone.set_input_files({"name": "../../evil.jsonl", "mimeType": "application/json",
                                  "buffer": (CORPUS / "bom_utf8.jsonl").read_bytes()})
        settle(page, "evil.jsonl · read as ")
        settle(page, "all checks passed")
        page.get_by_role("button", name="Save dataset").click()
        settle(page, "Pick at least one metric")
        browser.close()
    names = [d["name"] for d in store.list_datasets()]
    assert len(names) == before + 1 and "evil.jsonl" in names
    assert not (ROOT.parent / "evil.jsonl").exists() and not (ROOT / "evil.jsonl").exists()
    assert proc.poll() is None  # the server is still up


def test_numbers_as_text_reach_the_results_table(home_store, datasets_page):
    # issue 10: "response": 42 was accepted, then failed in the table; now it is the text "42" end to end
    from evaluators import evaluate

    rid = evaluate(CORPUS / "number_as_text.jsonl", ["f1_score"], store=home_store).run_id
    at = datasets_page
    at.switch_page("pages/results.py")
    at.query_params.update(run=rid, view="Rows")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    table = next(d.value for d in at.dataframe if "response" in d.value.columns)
    assert list(table["response"]) == ["Paris.", "42"]
    # f1 of "42" against "42.5": tokens {42} vs {42.5} share nothing
    assert list(table["f1_score"]) == [1.0, 0.0]
