"""The Review page's Align tab (ui/align_tab.py, issue 34) in AppTest on the synthetic world of
tests/align_world.py: its baseline card, candidates, gate and corrected rates are the engine's numbers."""
from __future__ import annotations

import pytest

from evaluators import evaluate
from evaluators.review.align import align, align_baseline, promoted_rates
from tests import align_world as w
from tests.apptest import app, shown_text
from tests.judge_server import JudgeServer
from ui.align_tab import bias_line, card_rows, num, pct, pvalue, with_ci

pytestmark = pytest.mark.usefixtures("fresh_caches", "forget_custom_metrics")


@pytest.fixture
def server():
    with JudgeServer(responder=w.responder) as s:
        yield s


def _judged(store, server, tmp_path, monkeypatch, blame: str = w.PLANTED, n: int = 120,
            reviewed: list[int] | None = None, **world) -> None:
    """The world's ``n`` rows judged by the scripted loopback judge as run w.RUN_ID in the dashboard's store, and
    the reviewers' verdicts on the ``reviewed`` rows (default: every row)."""
    rows, human = w.world(n, 0, reviewed=reviewed, **world)
    path = tmp_path / "acceptable.md"
    path.write_text(w.METRIC_FILE, encoding="utf-8")
    judge = {"model": "m", "provider": "compatible", "base_url": server.url, "max_retries": 0}
    with monkeypatch.context() as m:  # (not undo(): that would also undo the test's own EVAL_HOME)
        m.setattr("evaluators.store.store.new_id", lambda: w.RUN_ID)
        res = evaluate(rows, [w.METRIC], judge=judge, store=store, metric_files=[str(path)])
    assert res.status == "completed"
    store.save_reviews(w.RUN_ID, w.reviews(rows, human, None if reviewed is None else set(reviewed), blame=blame))


@pytest.fixture
def world(home_store, server, tmp_path, monkeypatch):
    _judged(home_store, server, tmp_path, monkeypatch)
    return home_store, server


def _table(at, first_column: str) -> dict:
    """The st.table whose first column is ``first_column``, as {column: {row: text}} (escapes undone)."""
    from tests.apptest import as_read

    for t in at.table:
        df = t.value
        if list(df.columns)[:1] == [first_column] or (first_column in df.columns):
            return {as_read(c): {as_read(i): as_read(v) for i, v in df[c].items()} for c in df.columns}
    raise AssertionError(f"no table with a column {first_column!r}")


def _click(at, label: str) -> None:
    next(b for b in at.button if b.label == label and not b.disabled).click()
    at.run(timeout=300)


def test_the_align_tab_shows_the_engines_numbers_from_baseline_to_promotion(world):
    store, server = world
    at = app("pages/review.py", run=w.RUN_ID, view="Align")
    base = align_baseline(store, w.RUN_ID, w.METRIC)
    card = _table(at, "dev")
    assert card["dev"] == card_rows(base["baseline"]["dev"]) and card["test"] == card_rows(base["baseline"]["test"])
    text = shown_text(at)
    sp = base["splits"]
    assert f"Splits: {sp['train']} train, {sp['dev']} dev, {sp['test']} test rows" in text and "test split used 0 times" in text
    assert not any(b.label == "Promote" for b in at.button)
    calls = len(server.calls)
    _click(at, "Build candidates")
    assert len(server.calls) > calls and store.test_split_uses(w.METRIC) == 1
    # the engine again, on the same store and judge: the same numbers (every reply now from the cache)
    out = align(store, w.RUN_ID, w.METRIC, method="both")
    g = out["gate"]
    gate = _table(at, "value")["value"]
    assert gate["κ of the current judge"] == num(g["kappa_current"]) and gate["difference"] == num(g["delta"])
    assert gate["95% interval of the difference (paired bootstrap)"] == \
        f"[{num(g['delta_ci95_low'])}, {num(g['delta_ci95_high'])}]"
    assert gate["McNemar's p"] == pvalue(g["mcnemar_p"]) and gate["verdict"] == "better"
    assert gate["rows the two judges disagree on"] == str(g["disagreements"])
    text = shown_text(at)
    assert g["sentence"] in text and "Test split used 1 time:" in text and "test split used 1 time ·" in text
    assert {c["method"] for c in out["candidates"]} == {"rules", "examples", "both"}
    for c in out["candidates"]:
        assert f"Candidate: {c['method']}" in text
        assert w.RULES_HEADER in "".join(x.value for x in at.code) or c["method"] == "examples"
    assert f"Candidate: {out['selected']} · chosen on dev" in text
    assert "+Rules your reviewers apply" in "".join(x.value for x in at.code)  # a unified diff, as text
    calls = len(server.calls)
    at.run()  # a rerun calls no judge: the result is kept in the session
    assert len(server.calls) == calls and store.test_split_uses(w.METRIC) == 2  # (the engine's own call above)
    _click(at, "Promote")
    assert store.saved_metric(w.METRIC)["version"] == 1 and store.promotion(w.METRIC, 1) is not None
    rates = promoted_rates(store, out)
    shown = _table(at, "corrected")
    for who, x in (("current judge", rates["current"]), ("promoted judge (version 1)", rates["candidate"])):
        assert shown["corrected"][who] == pct(x["corrected"])
        assert shown["95% interval"][who] == f"[{pct(x['ci95_low'])}, {pct(x['ci95_high'])}]"
    assert next(b for b in at.button if b.label == "Promote").disabled
    assert bias_line("Length bias with the promoted judge", rates["length_bias"]) in shown_text(at)
    assert bias_line("Length bias", base["baseline"]["length_bias"]) in shown_text(at)
    assert with_ci([None, None, None]) == "–"


def test_promote_is_disabled_when_the_gate_does_not_say_better(home_store, server, tmp_path, monkeypatch):
    """The reviewers' notes blame a word that goes with "fail" on train and dev only: the rule wins on dev, and
    the gate on the held-out rows does not call it better."""
    _judged(home_store, server, tmp_path, monkeypatch, blame=w.SPURIOUS, spurious_in=("train", "dev"))
    at = app("pages/review.py", run=w.RUN_ID, view="Align")
    at.radio(key="align.method").set_value("rules")
    _click(at, "Build candidates")
    gate = _table(at, "value")["value"]
    assert gate["verdict"] != "better" and any(e.value.startswith(("No detectable", "Worse")) for e in at.warning)
    assert next(b for b in at.button if b.label == "Promote").disabled
    assert home_store.saved_metrics() == []


def test_what_the_proposer_wrote_is_shown_as_text_only(home_store, tmp_path, monkeypatch):
    """A proposer whose rules carry Markdown and HTML: on the tab they are text (st.text, the diff's st.code),
    never Markdown."""
    import json

    from tests.test_dashboard_security import HOSTILE, _no_payload_in_markdown

    def hostile_proposer(prompt: str, request: dict) -> str:
        reply = w.responder(prompt, request)
        if '{"rules": [' in prompt and "Case C1" in prompt:
            rules = json.loads(reply)["rules"]
            return json.dumps({"rules": [dict(r, rule=f"{r['rule']} {HOSTILE}") for r in rules]})
        return reply

    with JudgeServer(responder=hostile_proposer) as server:
        _judged(home_store, server, tmp_path, monkeypatch)
        at = app("pages/review.py", run=w.RUN_ID, view="Align")
        at.radio(key="align.method").set_value("rules")
        _click(at, "Build candidates")
    assert any(HOSTILE in t.value for t in at.text) and any(HOSTILE in c.value for c in at.code)
    _no_payload_in_markdown(at)


def test_another_judge_set_on_the_tab_judges_the_candidates(world, tmp_path):
    store, server = world
    with JudgeServer(responder=w.responder) as other:
        at = app("pages/review.py", run=w.RUN_ID, view="Align")
        assert not any(b.label == "Build candidates" and b.disabled for b in at.button)
        at.toggle(key="align.other").set_value(True).run()
        assert at.text_input(key="align.judge.base_url").value == server.url  # starts from the run's judge
        at.text_input(key="align.judge.model").input("").run()
        assert next(b for b in at.button if b.label == "Build candidates").disabled  # no model: nothing to ask
        at.text_input(key="align.judge.model").input("m")
        at.text_input(key="align.judge.base_url").input(other.url)
        at.run()
        before = len(server.calls)
        _click(at, "Build candidates")
        assert len(other.calls) > 100 and len(server.calls) == before  # the run's own judge asked nothing
    assert "Better: " in shown_text(at) and not next(b for b in at.button if b.label == "Promote").disabled


@pytest.mark.no_store
def test_an_error_the_tab_shows_carries_no_key():
    from ui.align_tab import said

    assert said(Exception("401: key typed-secret-1 refused"), "typed-secret-1") == "401: key *** refused"
    assert "sk-***" in said(Exception("Incorrect API key provided: sk-abcd****wxyz"), None)
