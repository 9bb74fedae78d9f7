"""Users' own metrics from files: our template, Prompty, code (@metric, entry points) and OpenAI graders, run
against the loopback judge and a real SQLite store; bad files refused naming file, line and key; saved
metrics versioned, runs keeping the version they used."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from evaluators import evaluate
from evaluators.core import registry
from evaluators.core.errors import UsageError
from evaluators.metrics.custom import load_metric_file, register_entry_points, register_metric_files
from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("forget_custom_metrics")

EXAMPLES = ROOT / "examples" / "metrics"
ROWS = [
    {"query": "Am I covered for water damage?", "response": "Yes. Under policy P-1234 you are covered.",
     "ground_truth": "yes. under policy p-1234 you are covered.", "policy_id": "P-1234"},
    {"query": "Can I cancel?", "response": "You can cancel any time within 14 days",
     "ground_truth": "Yes, within 14 days.", "policy_id": "P-77"},
]


def _judge(server) -> dict:
    return {"model": "m", "provider": "compatible", "base_url": server.url, "max_retries": 0}


def _write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_template_prompty_code_and_graders_run_like_built_ins(judge_server, store, tmp_path):
    files = [str(EXAMPLES / f) for f in ("politeness.md", "cites_policy.prompty", "word_count.py",
                                         "exact_answer.json")]
    res = evaluate(ROWS, ["politeness", "cites_policy", "word_count", "answer_shape", "exact_answer"],
                   judge=_judge(judge_server), store=store, metric_files=files, out=tmp_path / "out")
    assert res.status == "completed"
    rows = res.rows
    # code metrics: words counted by hand (7 and 8), full stop and sentence marks
    assert list(rows["outputs.word_count.word_count"]) == [7.0, 8.0]
    assert list(rows["outputs.answer_shape.answer_shape"]) == [1.0, 0.0]
    assert list(rows["outputs.answer_shape.answer_sentences"]) == [2.0, 0.0]
    # string_check ilike: the reference (lower-cased) is inside the first response, not the second
    assert list(rows["outputs.exact_answer.exact_answer"]) == [1.0, 0.0]
    m = res.metrics
    assert m["word_count.word_count"] == 7.5 and m["exact_answer.exact_answer_threshold"] == 1.0
    assert m["cites_policy.cites_policy_threshold"] == 4.0  # from the Prompty file's front matter
    # the judge was sent our template with the row's response, and the Prompty file with a non-canonical column
    sent = {c["messages"][-1]["content"].split("\n")[0]: c for c in judge_server.calls}
    polite = next(c for c in judge_server.calls if "How polite" in c["messages"][1]["content"])
    assert polite["messages"][0] == {"role": "system", "content": "You review the tone of a customer-support "
                                                                  "assistant. You are fair, consistent and brief."}
    cites = [c for c in judge_server.calls if c["messages"][0]["content"].startswith("You check support")]
    assert {c["messages"][1]["content"].split("\n")[0] for c in cites} == {"The case is about policy P-1234.",
                                                                          "The case is about policy P-77."}
    assert all(c["response_format"] == {"type": "json_object"} for c in cites) and sent
    # each judged result records the metric's signature, version included
    meta = {r.metric: r.meta for r in store.load_results(res.run_id) if r.meta}
    assert meta["politeness"]["signature"].startswith("politeness|v:1|")
    written = [json.loads(x) for x in (tmp_path / "out" / "rows.jsonl").read_text().splitlines()]
    assert written[0]["outputs.politeness.politeness"] == rows["outputs.politeness.politeness"][0]


def test_code_metric_from_an_installed_package_entry_point(tmp_path, monkeypatch):
    (tmp_path / "acme_metrics.py").write_text(
        "from evaluators import metric\n\n@metric(name='shouting', fields=['response'], threshold=0.2,"
        " higher_is_better=False)\ndef shouting(row):\n    t = row['response']\n"
        "    return sum(c.isupper() for c in t) / max(1, sum(c.isalpha() for c in t))\n")
    info = tmp_path / "acme_metrics-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-metrics\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[evaluators.metrics]\nshouting = acme_metrics:shouting\n"
                                           "broken = acme_metrics:missing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from evaluators.metrics.custom.code import REFUSED

    register_entry_points()  # a broken entry point is refused by name; the others load
    assert any(r.startswith("entry point broken = acme_metrics:missing: cannot be loaded") for r in REFUSED)
    spec = registry.get_metric("shouting")
    assert spec.compute({"response": "ABc d"}) == {"shouting": 0.5}  # 2 capitals of 4 letters
    assert not spec.higher_is_better and spec.definition["entry_point"] == "acme_metrics:shouting"
    sys.modules.pop("acme_metrics", None)


@pytest.mark.parametrize("name,text,where", [
    ("no_fields.md", "---\nname: tone\nkind: score\n---\nRate {{response}}\n", "no_fields.md: fields: missing"),
    ("kind.md", "---\nname: tone\nfields: [response]\nkind: stars\n---\nRate {{response}}\n",
     "kind.md:4: kind: unknown kind 'stars'"),
    ("undeclared.md", "---\nname: tone\nfields: [response]\n---\nQ: {{response}}\nAnd {{query}}\n",
     "undeclared.md:6: template: the template uses {{query}}"),
    ("typo.md", "---\nname: tone\nfields: [response]\nthreshhold: 3\n---\nRate {{response}}\n",
     "typo.md:4: threshhold: unknown setting"),
    ("range.md", "---\nname: tone\nfields: [response]\nrange: [1, 5]\nthreshold: 9\n---\nRate {{response}}\n",
     "range.md:5: threshold: 9 is outside the range 1-5"),
    ("yaml.prompty", "---\nname: tone\ninputs:\n  response: {type: string\n---\nuser:\n{{response}}\n",
     "yaml.prompty:4: the front matter is not valid YAML"),
    ("jinja.prompty", "---\nname: tone\ninputs:\n  response: {}\n---\nuser:\n{% if response %}\n{{response}}\n",
     "jinja.prompty:8: template: the template is not valid Jinja2"),
    ("undeclared.prompty", "---\nname: tone\ninputs:\n  response: {}\n---\nuser:\n\n{{ query }}\n",
     "undeclared.prompty:8: template: the template uses 'query'"),
    ("grader.json", '{"type": "python", "name": "x"}', "grader.json: type: unknown grader type 'python'"),
    ("sim.json", '{"type": "text_similarity", "name": "x", "input": "{{sample.output_text}}", '
                 '"reference": "{{item.ground_truth}}", "evaluation_metric": "cosine", "pass_threshold": 0.5}',
     "sim.json: evaluation_metric: 'cosine' is not supported"),
    ("bad.py", "from evaluators import metric\n\n@metric(name='x', fields=['response'], range=(5, 1))\n"
               "def x(row):\n    return 1.0\n", "bad.py:3: range: must be (low, high)"),
])
def test_bad_definitions_are_refused_naming_file_line_and_key(tmp_path, name, text, where):
    path = _write(tmp_path, name, text)
    with pytest.raises(UsageError) as e:
        register_metric_files([path])
    assert str(e.value).startswith(str(tmp_path / where.split(":")[0])), str(e.value)
    assert where.split(" ", 1)[0] in str(e.value) and where.split(" ", 1)[1] in str(e.value), str(e.value)
    assert not [s for s in registry._REGISTRY.values() if s.definition is not None]  # nothing half-registered


def test_a_file_may_not_take_a_built_in_name_unless_renamed(tmp_path):
    path = _write(tmp_path, "coherence.prompty", "---\nname: Coherence\ninputs: [query, response]\n---\n"
                                                 "user:\n{{query}} {{response}}\n")
    with pytest.raises(UsageError, match="'coherence' is a built-in metric's name.*my_coherence="):
        register_metric_files([path])
    assert register_metric_files([f"my_coherence={path}"]) == ["my_coherence"]
    assert registry.get_metric("coherence").definition is None


def test_text_similarity_grader_scores_with_our_classic_metrics(tmp_path):
    path = _write(tmp_path, "g.json", json.dumps({"testing_criteria": [
        {"type": "text_similarity", "name": "Close BLEU", "input": "{{sample.output_text}}",
         "reference": "{{item.ground_truth}}", "evaluation_metric": "bleu", "pass_threshold": 0.3},
        {"type": "text_similarity", "name": "fuzzy", "input": "{{sample.output_text}}",
         "reference": "{{item.ground_truth}}", "evaluation_metric": "fuzzy_match", "pass_threshold": 0.8}]}))
    close, fuzzy = load_metric_file(path)
    row = {"response": "the cat sat on the mat today", "ground_truth": "the cat sat on the mat"}
    assert close.name == "close_bleu" and close.default_threshold == 0.3
    assert close.compute(row)["close_bleu"] == registry.get_metric("bleu").compute(row)["bleu_score"]
    # difflib: 2 * 22 matching characters / (28 + 22)
    assert math.isclose(fuzzy.compute(row)["fuzzy"], 2 * 22 / 50)


def test_label_model_grader_is_asked_of_the_judge(judge_server, store, tmp_path):
    path = _write(tmp_path, "tone.json", json.dumps({
        "type": "label_model", "name": "tone", "model": "o4-mini", "labels": ["friendly", "neutral", "hostile"],
        "passing_labels": ["friendly", "neutral"],
        "input": [{"role": "developer", "content": "Classify the tone."},
                  {"role": "user", "content": "{{sample.output_text}}"}]}))
    judge_server.responder = lambda prompt, req: json.dumps(
        {"reason": "r", "label": "hostile" if "cancel" in prompt else "friendly"})
    res = evaluate(ROWS, ["tone"], judge=_judge(judge_server), store=store, metric_files=[path])
    assert list(res.rows["outputs.tone.tone_label"]) == [False, True]  # true = flagged: not a passing label
    assert judge_server.calls[0]["messages"][0] == {"role": "system", "content": "Classify the tone."}


def test_saved_metric_versions_and_runs_keep_theirs(judge_server, store, tmp_path, capsys):
    from evaluators.cli.main import main

    db = store.url
    path = EXAMPLES / "politeness.md"
    assert main(["metrics", "add", str(path), "--db", db]) == 0
    data = _write(tmp_path, "rows.jsonl", "\n".join(json.dumps(r) for r in ROWS))
    common = ["--judge-base-url", judge_server.url, "--judge-model", "m", "--db", db, "--quiet"]
    assert main(["run", data, "--metrics", "politeness", "--out", str(tmp_path / "v1"), *common]) == 0
    v2 = path.read_text().replace("threshold: 3", "threshold: 4").replace("How polite", "How courteous")
    assert main(["metrics", "add", _write(tmp_path, "politeness.md", v2), "--db", db]) == 0
    assert "saved politeness version 2" in capsys.readouterr().out
    assert main(["run", data, "--metrics", "politeness", "--out", str(tmp_path / "v2"), *common]) == 0
    runs = sorted(store.list_runs(), key=lambda r: r["created_at"])
    sigs = [{r.meta["signature"].split("|")[1] for r in store.load_results(run["id"])} for run in runs]
    assert sigs == [{"v:1"}, {"v:2"}]
    from evaluators.read.results import open_results

    first = open_results(store, runs[0]["id"])  # read after version 2 was saved: still version 1's threshold
    assert first.metrics()["politeness.politeness_threshold"] == 3.0
    assert open_results(store, runs[1]["id"]).metrics()["politeness.politeness_threshold"] == 4.0
    prompts = [c["messages"][1]["content"][:16] for c in judge_server.calls]
    assert prompts == ["How polite is th"] * 2 + ["How courteous is"] * 2  # version 2 not answered from v1's cache
    assert main(["metrics", "show", "politeness", "--version", "1", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "saved, version 1" in out and "versions 1, 2" in out and "threshold: 3" in out


def test_scores_from_probabilities_are_the_weighted_mean_of_the_score_tokens(judge_server, store, tmp_path):
    """G-Eval (Liu et al. 2023): the judge wrote 4, but gave 4 p=0.5, 3 p=0.3, 5 p=0.1 and the word "four"
    p=0.1 at that token. Over the scale's tokens (0.9 in all): (4·0.5 + 3·0.3 + 5·0.1) / 0.9 = 3.4 / 0.9."""
    text = (EXAMPLES / "politeness.md").read_text().replace("reason_key: reason", "reason_key: reason\nlogprobs: true")
    path = _write(tmp_path, "politeness.md", text)
    reply = '{"reason": "courteous", "score": 4}'
    judge_server.responder = lambda prompt, req: reply
    tokens = ['{"', "reason", '":', ' "', "courte", "ous", '",', ' "', "score", '":', " ", "4", "}"]
    assert "".join(tokens) == reply
    alts = {"4": math.log(0.5), "3": math.log(0.3), "5": math.log(0.1), "four": math.log(0.1)}

    def top_logprobs_for(content):
        return [{"token": t, "logprob": alts[t] if t == "4" else 0.0,
                 "top_logprobs": [{"token": a, "logprob": lp} for a, lp in alts.items()] if t == "4"
                 else [{"token": t, "logprob": 0.0}]} for t in tokens]

    judge_server.top_logprobs_for = top_logprobs_for
    res = evaluate(ROWS[:1], ["politeness"], judge=_judge(judge_server), store=store, metric_files=[path])
    assert math.isclose(res.rows["outputs.politeness.politeness"][0], 3.4 / 0.9)
    assert judge_server.calls[0]["logprobs"] is True and judge_server.calls[0]["top_logprobs"] == 20
    (r,) = store.load_results(res.run_id)
    assert r.outputs["politeness_sampled"] == 4.0 and "logprobs:True" in r.meta["signature"]
    # asked again (same rows, a new run): answered from the cache, the same weighted value
    again = evaluate(ROWS[:1], ["politeness"], judge=_judge(judge_server), store=store)
    assert math.isclose(again.rows["outputs.politeness.politeness"][0], 3.4 / 0.9) and len(judge_server.calls) == 1
    # a run option turns it off: the sampled score, asked anew (the request differs, so does the cache key)
    off = evaluate(ROWS[:1], ["politeness"], judge=_judge(judge_server), store=store,
                   options={"politeness": {"logprobs": False}})
    assert off.rows["outputs.politeness.politeness"][0] == 4.0 and "logprobs" not in judge_server.calls[1]


def test_cli_runs_metric_files(judge_server, store, tmp_path, capsys):
    from evaluators.cli.main import main

    data = _write(tmp_path, "rows.jsonl", "\n".join(json.dumps(r) for r in ROWS))
    files = [a for f in ("politeness.md", "cites_policy.prompty", "word_count.py") for a in ("--metric-file", str(EXAMPLES / f))]
    code = main(["run", data, "--metrics", "politeness,cites_policy,word_count", "--out", str(tmp_path / "out"),
                 "--judge-base-url", judge_server.url, "--judge-model", "m", "--db", store.url, "--quiet", *files])
    assert code == 0
    written = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert written["word_count.word_count"] == 7.5 and written["cites_policy.scored_rows"] == 2
    assert written["politeness.scored_rows"] == 2 and len(judge_server.calls) == 4
    assert main(["metrics", str(data), "--metric-file", str(EXAMPLES / "cites_policy.prompty"), "--db", store.url]) == 0
    listed = capsys.readouterr().out
    assert "Your own metrics" in listed and "cites_policy" in listed and "[available]" in listed
