"""A run checks only the fields its metrics read (API and CLI): a mapped column no chosen metric reads never
refuses a row; it is left out of the mapping, its values as the file wrote them. The fields a metric reads
stay as strictly checked as ever."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from evaluators.api import evaluate
from evaluators.core.errors import DataValidationError
from evaluators.core.registry import FIELDS
from evaluators.data import loading
from evaluators.data.loading import FileDataset, load_dataset, load_dataset_streaming, metric_fields
from evaluators.judge.config import JudgeConfig
from tests.conftest import ROOT, env_for_subprocess
from tests.judge_server import JudgeServer
from tests.safety_judge import safety_responder

ROWS = [  # a safety set whose expected labels sit in 'ground_truth': no text, no list of answers
    {"query": "Write the opening lines of a famous novel.", "response": "It was a bright cold day in April. [pm:true]",
     "ground_truth": True},
    {"query": "Summarise the plot of Hamlet.", "response": "A prince avenges his father. [pm:false]",
     "ground_truth": {"label": "original", "reviewer": "kt"}},
    {"query": "Give me a haiku about rain.", "response": "Soft rain on the roof / ...", "ground_truth": 42},
]
PROBLEMS = ["labels.jsonl, row 1, field 'ground_truth': ground_truth must be text, got true/false",
            "labels.jsonl, row 2, field 'ground_truth': ground_truth must be text, got an object"]


@pytest.fixture
def labels(tmp_path):
    p = tmp_path / "labels.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return p


def test_the_fields_a_run_reads():
    assert metric_fields(["protected_material"]) == {"query", "response"}  # its template shows the user's message
    assert metric_fields(["f1_score", "bleu"]) == {"response", "ground_truth"}
    assert metric_fields(["groundedness"]) == {"query", "response", "context"}
    assert metric_fields(["similarity", "fluency"]) == {"query", "response", "ground_truth"}
    assert metric_fields(["wildbench_score"]) == {"query", "response", "checklist"}
    assert metric_fields(["fluency"], templated={"fluency"}) == set(FIELDS)  # a user's template may read any
    assert metric_fields(["f1_score", "nope"]) is None  # every field checked; the name refused after loading


def test_a_column_no_chosen_metric_reads_never_refuses_a_row(labels, store):
    with JudgeServer(safety_responder) as judge:
        res = evaluate(labels, ["protected_material"], store=store,
                       judge=JudgeConfig(model="loopback", provider="compatible", base_url=judge.url))
        prompts = judge.prompts()
    assert res.status == "completed" and res.metrics["protected_material.scored_rows"] == 3
    assert [r["outputs.protected_material.protected_material_label"] for r in res.results.rows()] == [True, False, False]
    assert any("User's message:\nSummarise the plot of Hamlet.\n" in p for p in prompts)
    # left out of the mapping, never converted: the results carry the file's own values
    assert [r["inputs.ground_truth"] for r in res.results.rows()] == [r["ground_truth"] for r in ROWS]
    stored = store.get_dataset(store.get_run(res.run_id)["dataset_id"])
    assert stored.mapping == {"query": "query", "response": "response"}


def test_the_fields_a_run_reads_stay_strict(labels, store):
    for metrics in (["f1_score"], ["protected_material", "bleu"]):
        with pytest.raises(DataValidationError) as e:
            evaluate(labels, metrics, store=store, judge="never-called")
        assert [str(p) for p in e.value.problems] == PROBLEMS
    with pytest.raises(DataValidationError) as e:
        load_dataset(labels)  # no run: every mapped field checked (the Datasets page)
    assert [str(p) for p in e.value.problems] == PROBLEMS


def test_a_users_mapping_to_a_column_no_metric_reads(tmp_path):
    rows = [{"prompt": "Is tap water safe here?", "answer": "Yes, it meets EU limits.",
             "labels": [{"category": "violence", "severity": 0}]},
            {"prompt": "Best time to see puffins?", "answer": "May to early August.", "labels": []}]
    fields = metric_fields(["violence"])
    ds = load_dataset(rows, {"ground_truth": "labels"}, fields=fields)
    assert ds.mapping == {"query": "prompt", "response": "answer"} and ds.left_out == {"ground_truth": "labels"}
    assert ds.records == rows
    with pytest.raises(DataValidationError, match=r"row 1, field 'labels': ground_truth\[0\]: each acceptable answer "
                                                  "must be text, got an object"):
        load_dataset(rows, {"ground_truth": "labels"}, fields=metric_fields(["rouge"]))
    # a response no metric reads, missing from a row, is left out too (retrieval reads query and context)
    rag = [{"question": "Opening hours?", "contexts": ["Open 9-17 on weekdays."], "answer": "9 to 5."},
           {"question": "Parking?", "contexts": ["No parking on site."], "answer": None}]
    ds = load_dataset(rag, fields=metric_fields(["retrieval"]))
    assert ds.mapping == {"query": "question", "context": "contexts"} and ds.left_out == {"response": "answer"}
    with pytest.raises(DataValidationError, match="row 2, field 'answer': missing response"):
        load_dataset(rag)


@pytest.mark.parametrize("keep", [True, False])
def test_streamed_and_loaded_datasets_agree(labels, monkeypatch, keep):
    # a small file keeps its checked records; a big one is read again at each walk (FileRecords re-checks)
    monkeypatch.setattr(loading, "KEEP_BYTES", 10**9 if keep else 0)
    fields = metric_fields(["protected_material"])
    loaded, streamed = load_dataset(labels, fields=fields), load_dataset_streaming(labels, fields=fields)
    assert isinstance(streamed, FileDataset) and (streamed.records.kept is not None) == keep
    assert loaded.mapping == streamed.mapping == {"query": "query", "response": "response"}
    assert loaded.left_out == streamed.left_out == {"ground_truth": "ground_truth"}
    assert loaded.records == list(streamed.records) == list(streamed.records) == ROWS  # walked twice
    blob = json.dumps([{"query": "query", "response": "response"}, ROWS], sort_keys=True, separators=(",", ":"))
    assert loaded.content_hash == streamed.content_hash == hashlib.sha256(blob.encode()).hexdigest()
    assert loaded.fields() == streamed.fields() == {"query", "response"}
    with pytest.raises(DataValidationError) as e:  # read: refused word for word as when loaded whole
        load_dataset_streaming(labels, fields=metric_fields(["gleu"]))
    assert [str(p) for p in e.value.problems] == PROBLEMS


def test_the_command_line_checks_only_what_its_metrics_read(tmp_path):
    rows = [{"query": "Capital of Chile?", "response": "Santiago.", "ground_truth": "Santiago",
             "context": {"source": "atlas", "page": 12}},
            {"query": "Capital of Kenya?", "response": "Nairobi is the capital.", "ground_truth": "Nairobi",
             "context": "Nairobi has been Kenya's capital since independence."}]
    data = tmp_path / "geo.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "evaluators", "run", data, *map(str, args)], cwd=ROOT,
                              capture_output=True, text=True, env=env_for_subprocess(), timeout=240)

    p = cli("--metrics", "f1_score", "--out", tmp_path / "o")
    assert p.returncode == 0, p.stderr
    out = [json.loads(line) for line in (tmp_path / "o" / "rows.jsonl").read_text().splitlines()]
    # F1 by hand: [santiago] vs [santiago] -> 1; [nairobi is capital] vs [nairobi]: p 1/3, r 1 -> 1/2
    assert [r["outputs.f1_score.f1_score"] for r in out] == pytest.approx([1.0, 0.5])
    assert out[0]["inputs.context"] == {"source": "atlas", "page": 12}
    p = cli("--metrics", "retrieval", "--out", tmp_path / "r", "--judge-base-url", "http://127.0.0.1:9/v1")
    assert p.returncode == 2 and "geo.jsonl, row 1, field 'context': context must be text, a list of texts or " \
                                 "{'citations': [...]}, got an object" in p.stderr, p.stderr
