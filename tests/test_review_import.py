"""``review import`` against hostile files, on SQLite and PostgreSQL: every refusal names the file, the line and
the field, the store is left as it was, and what is stored is counted as it happened. The Review page's
verdicts pass the same check (Store.save_review)."""
from __future__ import annotations

import json

import pytest

from evaluators.api import evaluate
from evaluators.cli import main as cli
from evaluators.store.reviews import BadVerdict
from evaluators.store.store import Store
from tests.conftest import SINGLE

pytestmark = pytest.mark.both_stores

GOOD = {"id": "st-002", "metric": "coherence", "reviewer": "ann", "value": 2}


def _line(**changes) -> dict:
    return {"id": "st-001", "metric": "coherence", "reviewer": "bob", "value": 4, **changes}


def _nested(depth: int):
    v: object = "deep"
    for _ in range(depth):
        v = [v]
    return v


# (what, the file's second line (text, or bytes for the whole file), what the message says after the file's name)
HOSTILE = [
    ("binary file", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03 not verdicts",
     ": this is a gzip-compressed file, not JSON lines text; decompress it first; nothing was stored"),
    ("NUL bytes", b'{"id": "st-001"}\x00\x00\x00\n',
     ": binary data (a NUL byte at offset 16), not JSON lines text; nothing was stored"),
    ("not UTF-8", json.dumps(GOOD).encode() + b"\n" + b'{"id": "st-001", "note": "caf\xe9"}\n',
     ": line 2: not UTF-8: byte 0xe9 at column 30; save the file as UTF-8; nothing was stored"),
    ("nested 100 deep", json.dumps(_line(note=_nested(100))),
     ": line 2, field 'note': nested more than 64 levels deep; nothing was stored"),
    ("nested 100,000 deep", "[" * 100_000 + "]" * 100_000,
     ": line 2: nested more than 64 levels deep; nothing was stored"),
    ("note as an object", json.dumps(_line(note={"text": "fine", "by": "bob"})),
     ": line 2, field 'note': must be text, got an object ({'text': 'fine', 'by': 'bob'}); nothing was stored"),
    ("note of 2,001 characters", json.dumps(_line(note="n" * 2001)),
     ": line 2, field 'note': 2,001 characters; at most 2,000 are accepted; nothing was stored"),
    ("note of 20 MB", json.dumps(_line(note="n" * 20_000_000)),
     ": line 2, field 'note': 20,000,000 characters; at most 4,000,000 are accepted in one field; nothing was stored"),
    ("note with an escape code", json.dumps(_line(note="ok\x1b]0;pwned\x07")),
     ": line 2, field 'note': a control character (U+001B) at character 3; only printable text is accepted; "
     "nothing was stored"),
    ("blank reviewer", json.dumps(_line(reviewer="   ")),
     ": line 2, field 'reviewer': is blank; give the reviewer's name; nothing was stored"),
    ("reviewer as an object", json.dumps(_line(reviewer={"name": "bob"})),
     ": line 2, field 'reviewer': must be text, got an object ({'name': 'bob'}); nothing was stored"),
    ("reviewer of 5,000 characters", json.dumps(_line(reviewer="r" * 5000)),
     ": line 2, field 'reviewer': 5,000 characters; at most 200 are accepted; nothing was stored"),
    ("reviewer with a NUL", json.dumps(_line(reviewer="bo\x00b")),
     ": line 2, field 'reviewer': a control character (U+0000) at character 3; only printable text is accepted; "
     "nothing was stored"),
    ("reviewer with a lone surrogate", '{"id": "st-001", "metric": "coherence", "reviewer": "b\\ud800", "value": 4}',
     ": line 2, field 'reviewer': a lone surrogate (U+D800) at character 2; only printable text is accepted; "
     "nothing was stored"),
    ("value true", json.dumps(_line(value=True)),
     ": line 2, field 'value': true/false is not a value of coherence's scale (1, 2, 3, 4, 5); give the number; "
     "nothing was stored"),
    ("value as a list", json.dumps(_line(value=[4])),
     ": line 2, field 'value': [4] is not one of 1, 2, 3, 4, 5; nothing was stored"),
    ("id as an object", json.dumps(_line(id={"$ne": None})),
     ": line 2, field 'id': must be text or a whole number, got {'$ne': None}; nothing was stored"),
    ("agree as an object", json.dumps({**_line(), "value": None, "agree": {"yes": 1}}),
     ": line 2, field 'agree': must be true or false, got {'yes': 1}; nothing was stored"),
    ("the same verdict's key with another value", json.dumps({**GOOD, "value": 5}),
     ": line 2: the same id, metric and reviewer as line 1 with another verdict; keep one of them; nothing was stored"),
]


@pytest.fixture
def judged(store, judge_config):
    res = evaluate(SINGLE, ["coherence"], judge=judge_config, store=store, api_key="k")
    return store, res.run_id


def _import(capsys, store, rid, path) -> tuple[int, str, str]:
    code = cli.main(["review", "import", rid, str(path), "--db", store.url])
    out = capsys.readouterr()
    return code, out.out, out.err


def _state(store, rid) -> list[tuple]:
    return [(r["row_idx"], r["reviewer"], r["value"], r["note"], r["created_at"]) for r in store.reviews(rid)]


def test_each_hostile_file_is_refused_naming_file_line_and_field_and_stores_nothing(judged, tmp_path, capsys):
    store, rid = judged
    store.save_review(rid, 4, "coherence", "cy", 3.0, note="kept")  # the store's state before: one verdict
    before = _state(store, rid)
    for what, second, says in HOSTILE:
        f = tmp_path / "verdicts.jsonl"
        f.write_bytes(second if isinstance(second, bytes) else (json.dumps(GOOD) + "\n" + second + "\n").encode())
        code, out, err = _import(capsys, store, rid, f)
        assert (code, out, err) == (2, "", f"error: {f}{says}\n"), what
        assert _state(store, rid) == before, what


def test_every_problem_of_a_file_is_listed_and_a_csv_names_its_rows(judged, tmp_path, capsys):
    store, rid = judged
    f = tmp_path / "v.jsonl"
    f.write_text(json.dumps(GOOD) + "\n" + json.dumps(_line(reviewer="", note=7)) + "\n" + json.dumps(_line(id="st-999")) + "\n")
    code, out, err = _import(capsys, store, rid, f)
    assert code == 2 and err == (f"error: {f}: 3 problems, nothing was stored: line 2, field 'reviewer': is missing; "
                                 "line 2, field 'note': must be text, got a number (7); "
                                 f"line 3, field 'id': no row 'st-999' in run {rid}\n")
    c = tmp_path / "v.csv"
    c.write_text("id,metric,reviewer,value\nst-001,coherence,ann,4\nst-002,coherence,\"a\x07b\",true\n")
    code, out, err = _import(capsys, store, rid, c)
    assert code == 2 and err == (f"error: {c}: 2 problems, nothing was stored: row 2, field 'reviewer': a control "
                                 "character (U+0007) at character 2; only printable text is accepted; row 2, field "
                                 "'value': 'true' is not one of 1, 2, 3, 4, 5\n")
    assert store.reviews(rid) == []
    code, out, err = _import(capsys, store, "no-such-run", c)
    assert (code, err) == (2, "error: no run 'no-such-run' in this store (a run's id is what `run` prints, and the "
                              "Results page's address says run=ID)\n")


def test_stored_unchanged_and_duplicate_lines_are_counted_as_they_are(judged, tmp_path, capsys):
    store, rid = judged
    f = tmp_path / "v.jsonl"
    first = [GOOD, _line(), _line()]  # the third line repeats the second word for word
    f.write_text("".join(json.dumps(x) + "\n" for x in first))
    code, out, err = _import(capsys, store, rid, f)
    assert (code, err) == (0, "") and out == (f"stored 2 verdicts on run {rid}; 1 duplicate line ignored "
                                              "(2 rows, 2 reviewers)\n")
    assert [(r["row_idx"], r["reviewer"], r["value"]) for r in store.reviews(rid)] == [(0, "bob", 4.0), (1, "ann", 2.0)]
    times = {r["reviewer"]: r["created_at"] for r in store.reviews(rid)}
    f.write_text("".join(json.dumps(x) + "\n" for x in [GOOD, _line(value=5), _line(id="st-003", reviewer="cy")]))
    code, out, err = _import(capsys, store, rid, f)
    assert (code, err) == (0, "") and out == (f"stored 2 verdicts on run {rid} (1 new, 1 replacing the reviewer's "
                                              "earlier one); 1 already stored as given (3 rows, 3 reviewers)\n")
    got = store.reviews(rid)
    assert [(r["row_idx"], r["reviewer"], r["value"]) for r in got] == [(0, "bob", 5.0), (1, "ann", 2.0), (2, "cy", 4.0)]
    assert next(r["created_at"] for r in got if r["reviewer"] == "ann") == times["ann"]  # left as it was


def test_the_review_pages_verdicts_pass_the_same_check(judged):
    """Store.save_review (the Review page's write) refuses what the import refuses, on either store."""
    store, rid = judged
    for reviewer, note, value, says in [
            ("bo\x00b", None, 4.0, "field 'reviewer': a control character (U+0000) at character 3"),
            ("r" * 201, None, 4.0, "field 'reviewer': 201 characters; at most 200 are accepted"),
            (" ", None, 4.0, "field 'reviewer': is blank"),
            ("ann", "n" * 2001, 4.0, "field 'note': 2,001 characters; at most 2,000 are accepted"),
            ("ann", "a\x00", 4.0, "field 'note': a control character (U+0000) at character 2"),
            ("ann", None, True, "field 'value': must be a number, got true/false (True)"),
            ("ann", None, float("nan"), "field 'value': must be a number, got a number (nan)")]:
        with pytest.raises(BadVerdict) as e:
            store.save_review(rid, 0, "coherence", reviewer, value, note=note)
        assert str(e.value).startswith(says), (reviewer[:10], note and note[:10], value)
    store.save_review(rid, 0, "coherence", "r" * 200, 4.0, note="line one\nline two\ttabbed")  # at the limits: kept
    assert [(r["reviewer"], r["note"]) for r in Store(store.url).reviews(rid)] == [("r" * 200, "line one\nline two\ttabbed")]


def test_the_review_page_refuses_a_bad_name_or_note_with_a_message(home_store, fresh_caches):
    """In the page (AppTest): a name with a control character is refused at "Start reviewing", and a verdict
    whose note the store refuses says why where the verdict was given, with no exception and nothing stored."""
    from evaluators import load_dataset
    from evaluators.store.schema import Result
    from tests.apptest import app, shown_text

    ds = load_dataset([{"query": f"q{i}", "response": f"r{i}"} for i in range(3)])
    rid = home_store.create_run(home_store.save_dataset(ds), {"metrics": ["coherence"], "thresholds": {"coherence": 3}},
                                "h", "page run")
    home_store.write_results(rid, [Result(i, "coherence", 0, "ok", 4.0, {"coherence": 4.0}) for i in range(3)])
    home_store.update_run(rid, status="completed", tasks_total=3, tasks_done=3)
    at = app("pages/review.py", run=rid, row=1, allow_errors=True)  # a row on its own (no queue needed)
    name = next(t for t in at.text_input if t.label == "Your name")
    name.input("bo\x07b")
    next(b for b in at.button if b.label == "Start reviewing").click()
    at.run()
    assert not at.exception
    assert [e.value for e in at.error] == ["` Your name: a control character (U+0007) at character 3; only printable "
                                           "text is accepted `"]
    next(t for t in at.text_input if t.label == "Your name").input("dana")
    next(b for b in at.button if b.label == "Start reviewing").click()
    at.run()
    next(t for t in at.text_input if t.label.startswith("Note")).input("fine\x00")
    next(b for b in at.button if b.label == "2").click()
    at.run()
    assert not at.exception and home_store.reviews(rid) == []
    assert "Not saved: field 'note': a control character (U+0000) at character 5" in shown_text(at)
