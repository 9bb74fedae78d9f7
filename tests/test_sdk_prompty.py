"""Azure AI Evaluation SDK 1.18's own ``coherence.prompty``, loaded unchanged as a metric file, sends the judge
the same requests the SDK's CoherenceEvaluator sends (both against the loopback judge, compared body for body).

The SDK runs in a throwaway virtualenv, never in ours: ``EVAL_SDK_PYTHON`` names its interpreter, else
``bench/.sdk-venv`` (made by ``python bench/azure_sdk_keys.py``); without either the test is skipped, saying so.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from evaluators import evaluate
from evaluators.core import registry
from tests.conftest import ROOT
from tests.judge_server import JudgeServer

ROWS = [
    {"query": "What does the café serve?", "response": "Crêpes and croissants — baked on site.\nAlso {{tea}}."},
    {"query": "Is the museum open on Mondays?", "response": "No; {% raw %} it's closed Mondays."},
]
SDK_SIDE = """
import json, sys
from pathlib import Path
import azure.ai.evaluation as sdk
from importlib.metadata import version
from azure.ai.evaluation import CoherenceEvaluator, OpenAIModelConfiguration
url, rows = sys.argv[1], json.loads(sys.argv[2])
ev = CoherenceEvaluator(OpenAIModelConfiguration(type="openai", base_url=url, api_key="k", model="m"))
out = [ev(query=r["query"], response=r["response"]) for r in rows]
print(json.dumps({"prompty": str(Path(sdk.__file__).parent / "_evaluators/_coherence/coherence.prompty"),
                  "version": version("azure-ai-evaluation"), "scores": [o["coherence"] for o in out]}))
"""


def _sdk_python() -> str:
    py = os.environ.get("EVAL_SDK_PYTHON") or str(ROOT / "bench" / ".sdk-venv" / "bin" / "python")
    if not Path(py).is_file():
        pytest.skip("no Azure AI Evaluation SDK virtualenv (set EVAL_SDK_PYTHON, or run bench/azure_sdk_keys.py once)")
    return py


def _bodies(server: JudgeServer) -> list[dict]:
    """The request bodies the judge received, in a fixed order (calls in flight together arrive in any)."""
    return sorted(({k: v for k, v in c.items() if not k.startswith("_")} for c in server.calls),
                  key=lambda b: json.dumps(b, sort_keys=True))


def sdk_requests() -> tuple[dict, JudgeServer]:
    """The SDK's own coherence evaluator run on ROWS in its virtualenv: what it printed, and the loopback judge
    it asked (its requests recorded)."""
    py = _sdk_python()
    with JudgeServer() as sdk_judge:
        done = subprocess.run([py, "-c", SDK_SIDE, sdk_judge.url, json.dumps(ROWS)], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1]), sdk_judge


def test_sdk_coherence_prompty_sends_what_the_sdk_sends(store, tmp_path):
    sdk, sdk_judge = sdk_requests()
    assert sdk["version"].startswith("1.18.")
    try:
        with JudgeServer() as ours:
            res = evaluate(ROWS, ["sdk_coherence"], judge={"model": "m", "provider": "compatible", "base_url": ours.url},
                           store=store, metric_files=[f"sdk_coherence={sdk['prompty']}"])
    finally:
        registry._REGISTRY.pop("sdk_coherence", None)
    assert _bodies(ours) == _bodies(sdk_judge) and len(_bodies(ours)) == 2
    assert list(res.rows["outputs.sdk_coherence.sdk_coherence"]) == sdk["scores"]  # the same verdicts, read alike
    # the command line, and the file saved in the store as the dashboard's pickers read it
    from evaluators.cli.main import main

    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    try:
        assert main(["metrics", "add", f"sdk_coherence={sdk['prompty']}", "--db", store.url]) == 0
        with JudgeServer() as cli:
            assert main(["run", str(data), "--metrics", "sdk_coherence", "--out", str(tmp_path / "out"), "--quiet",
                         "--judge-base-url", cli.url, "--judge-model", "m", "--db", store.url]) == 0
    finally:
        registry._REGISTRY.pop("sdk_coherence", None)
    assert _bodies(cli) == _bodies(sdk_judge)


@pytest.mark.usefixtures("fresh_caches")
def test_sdk_coherence_prompty_pasted_in_the_new_metric_page_sends_what_the_sdk_sends(home_store):
    """The same file's text pasted on the dashboard's New metric page and tried on the rows: the judge receives
    the SDK's own messages, then it is saved under a name of its own."""
    from evaluators import load_dataset
    from tests.apptest import app

    sdk, sdk_judge = sdk_requests()
    did = home_store.save_dataset(load_dataset(ROWS))
    try:
        with JudgeServer() as ours:
            at = app("pages/metric.py", dataset=did)
            at.selectbox(key="metric.start").set_value("A metric file's text (paste it)").run()
            at.selectbox(key="metric.format").set_value("Prompty (.prompty)").run()
            at.text_area(key="metric.text").set_value(Path(sdk["prompty"]).read_text(encoding="utf-8")).run()
            at.text_input(key="metric.rename").set_value("sdk_coherence").run()
            at.selectbox(key="judge.provider").set_value("OpenAI-compatible base URL").run()
            at.text_input(key="judge.base_url").set_value(ours.url).run()
            at.text_input(key="judge.model").set_value("m").run()
            at.button(key="metric.try").click().run()
            assert not at.exception and not at.error, [e.value for e in at.error]
            at.button(key="metric.save").click().run()
    finally:
        registry._REGISTRY.pop("sdk_coherence", None)
    messages = sorted((c["messages"] for c in ours.calls), key=lambda m: json.dumps(m))
    assert messages == sorted((b["messages"] for b in _bodies(sdk_judge)), key=lambda m: json.dumps(m))
    assert home_store.saved_metric("sdk_coherence")["format"] == "prompty"
