"""``review import|export`` and ``agreement`` as a user runs them (subprocesses, the loopback judge, SQLite),
and verdicts a dataset brings in ``human_<metric>`` columns."""
from __future__ import annotations

import csv
import json

import pytest

from evaluators.store.store import Store
from tests.conftest import SINGLE
from tests.test_cli import cli

sklearn_metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn gives the reference kappas")


def _run(tmp_path, judge_server, data=SINGLE, metrics="coherence,violence"):
    out = tmp_path / "out"
    p = cli("run", data, "--metrics", metrics, "--out", out, "--judge-base-url", judge_server.url, "--quiet")
    assert p.returncode == 0, p.stderr
    rid = p.stdout.split("run ")[1].split(":")[0]
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    return rid, rows, out


def test_import_export_and_agreement(tmp_path, judge_server):
    rid, rows, _ = _run(tmp_path, judge_server)
    lines = []
    for r in rows[:12]:  # ann agrees on even rows, says 1 on odd ones; bob answers violence on two
        judge = r["outputs.coherence.coherence"]
        k = int(r["inputs.id"][-3:])
        lines.append({"id": r["inputs.id"], "metric": "coherence", "reviewer": "ann",
                      **({"agree": True} if k % 2 == 0 else {"value": 1})})
    lines.append({"id": "st-001", "metric": "violence", "reviewer": "bob", "value": "0", "note": "<b>fine</b>"})
    f = tmp_path / "verdicts.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    p = cli("review", "import", rid, f)
    assert p.returncode == 0, p.stderr
    assert "stored 13 verdicts" in p.stdout and "2 reviewers" in p.stdout

    p = cli("agreement", rid, "--json")
    assert p.returncode == 0, p.stderr
    keys = json.loads(p.stdout)
    judge = [r["outputs.coherence.coherence"] for r in rows[:12]]
    human = [v if int(r["inputs.id"][-3:]) % 2 == 0 else 1 for v, r in zip(judge, rows[:12])]
    expected = sklearn_metrics.cohen_kappa_score([v >= 3 for v in judge], [v >= 3 for v in human])
    assert keys["coherence.human_reviewed_rows"] == 12
    assert keys["coherence.human_kappa"] == pytest.approx(expected)
    assert keys["coherence.human_weighted_kappa"] == pytest.approx(
        sklearn_metrics.cohen_kappa_score(judge, human, labels=[1, 2, 3, 4, 5], weights="quadratic"))
    assert keys["violence.human_reviewed_rows"] == 1
    assert "coherence.coherence_pass_rate_corrected" in keys and "violence.violence_defect_rate_corrected" in keys
    text = cli("agreement", rid).stdout
    assert "corrected by 12 reviews" in text and "Cohen's kappa" in text

    for name in ("all.jsonl", "all.csv"):
        p = cli("review", "export", rid, "--out", tmp_path / name)
        assert p.returncode == 0, p.stderr
    exported = [json.loads(x) for x in (tmp_path / "all.jsonl").read_text().splitlines()]
    assert len(exported) == 13
    first = next(e for e in exported if e["id"] == "st-002")
    assert first["agree"] is True and first["value"] == judge[1] and first["judge_value"] == judge[1]
    with open(tmp_path / "all.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert [r["id"] for r in table] == [e["id"] for e in exported] and table[0]["time"]
    # the export imports again unchanged (ids, values, notes)
    again = cli("review", "import", rid, tmp_path / "all.csv")
    assert again.returncode == 0, again.stderr
    store = Store()
    assert sorted((r["row_idx"], r["reviewer"], r["value"], r["note"]) for r in store.reviews(rid)) == sorted(
        (int(e["id"][-3:]) - 1, e["reviewer"], e["value"], e["note"]) for e in exported)


@pytest.mark.parametrize("line, says", [
    ({"id": "st-999", "metric": "coherence", "reviewer": "ann", "value": 3}, "line 2, field 'id': no row 'st-999'"),
    ({"id": "st-001", "metric": "bleu", "reviewer": "ann", "value": 3}, "line 2, field 'metric': 'bleu' is not a judged"),
    ({"id": "st-001", "metric": "coherence", "reviewer": "ann", "value": 7}, "line 2, field 'value': 7 is not on"),
    ({"id": "st-001", "metric": "coherence", "value": 3}, "line 2, field 'reviewer': is missing"),
    ({"id": "st-001", "metric": "coherence", "reviewer": "ann", "agree": False}, "field 'agree': agree=false"),
])
def test_a_bad_verdict_is_named_and_nothing_is_stored(tmp_path, judge_server, line, says):
    rid, _, _ = _run(tmp_path, judge_server, metrics="coherence")
    f = tmp_path / "v.jsonl"
    good = {"id": "st-002", "metric": "coherence", "reviewer": "ann", "value": 2}
    f.write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")
    p = cli("review", "import", rid, f)
    assert p.returncode == 2 and says in p.stderr and str(f) in p.stderr, p.stderr
    assert Store().reviews(rid) == []  # all or nothing: the good first line was not kept


def test_human_columns_in_the_dataset_are_verdicts(tmp_path, judge_server):
    src = [json.loads(x) for x in SINGLE.read_text().splitlines()]
    _, rows, _ = _run(tmp_path / "a", judge_server, metrics="coherence")
    for rec, row in zip(src, rows):
        k = int(rec["id"][-3:])
        if k <= 10:  # the first ten rows labelled: 1 on rows 1-3, the judge's own score on rows 4-10
            rec["human_coherence"] = 1 if k <= 3 else row["outputs.coherence.coherence"]
    data = tmp_path / "labelled.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in src))
    _, rows2, out = _run(tmp_path / "b", judge_server, data=data, metrics="coherence")
    metrics = json.loads((out / "metrics.json").read_text())
    judge = [r["outputs.coherence.coherence"] for r in rows2[:10]]
    human = [r["inputs.human_coherence"] for r in rows2[:10]]
    assert metrics["coherence.human_reviewed_rows"] == 10
    assert metrics["coherence.human_kappa"] == pytest.approx(
        sklearn_metrics.cohen_kappa_score([v >= 3 for v in judge], [v >= 3 for v in human]))
    assert metrics["coherence.human_weighted_kappa"] == pytest.approx(
        sklearn_metrics.cohen_kappa_score(judge, human, labels=[1, 2, 3, 4, 5], weights="quadratic"))
    assert metrics["coherence.coherence_pass_rate_corrected"] is not None
    # the aggregates the run had without reviews are unchanged beside them
    assert metrics["coherence.coherence_pass_rate"] == pytest.approx(sum(v >= 3 for v in judge + [
        r["outputs.coherence.coherence"] for r in rows2[10:]]) / len(rows2))
