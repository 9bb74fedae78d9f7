"""The CLI end to end, as a user runs it: real subprocesses, the loopback judge, a SQLite store (and, for the
runs marked both_stores, PostgreSQL)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
import sqlalchemy as sa

from evaluators.data.loading import load_dataset
from evaluators.store.store import Store
from tests.conftest import (CONVERSATIONS, ROOT, SINGLE, default_store, default_store_made, env_for_subprocess,
                            home_url)
from tests.judge_server import expected_score, prompt_text
from tests.procs import stored_results, wait_until


def cli(*args, env=None, **kw):
    return subprocess.run([sys.executable, "-m", "evaluators", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, env=env or env_for_subprocess(), timeout=240, **kw)


def read_rows(out):
    return [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]


def test_classic_metrics_offline(tmp_path):
    out = tmp_path / "out"
    p = cli("run", SINGLE, "--metrics", "f1_score,bleu,gleu,rouge,meteor", "--out", f"{out}/")
    assert p.returncode == 0, p.stderr
    assert f": completed; wrote {out}/rows.jsonl" in p.stdout  # not "out//rows.jsonl" for --out out/
    rows = read_rows(out)
    assert len(rows) == 31 and rows[0]["inputs.id"] == "st-001" and rows[-1]["inputs.id"] == "st-031"
    keys = set(rows[0])
    for k in ["outputs.f1_score.f1_score", "outputs.f1_score.f1_score_result", "outputs.f1_score.f1_score_threshold",
              "outputs.bleu.bleu_score", "outputs.gleu.gleu_score", "outputs.meteor.meteor_score",
              "outputs.rouge.rouge_precision", "outputs.rouge.rouge_recall", "outputs.rouge.rouge_f1_score"]:
        assert k in keys
    metrics = json.loads((out / "metrics.json").read_text())
    mean = sum(r["outputs.bleu.bleu_score"] for r in rows) / 31
    assert metrics["bleu.bleu_score"] == pytest.approx(mean)
    assert metrics["bleu.scored_rows"] == 31 and metrics["bleu.errored_rows"] == 0
    assert "run.status" not in metrics  # a clean run's file is the SDK's keys alone
    assert "f1_score" in p.stdout and "pass rate" in p.stdout  # the summary table


@pytest.mark.both_stores
def test_judge_metrics_on_both_samples(tmp_path, judge_server, store_url):
    out1, out2 = tmp_path / "single", tmp_path / "conv"
    env = env_for_subprocess(EVAL_DATABASE_URL=store_url)
    p = cli("run", SINGLE, "--metrics", "coherence,fluency,groundedness,relevance,similarity", "--out", out1,
            "--judge-base-url", judge_server.url, "--judge-model", "loopback", "--threshold", "coherence=4", env=env)
    assert p.returncode == 0, p.stderr
    rows = read_rows(out1)
    assert len(judge_server.calls) == 31 * 5
    assert all(r["outputs.coherence.coherence_threshold"] == 4.0 for r in rows)
    for r in rows:
        assert r["outputs.similarity.similarity"] in (1, 2, 3, 4, 5)
        assert r["outputs.coherence.coherence_result"] == ("pass" if r["outputs.coherence.coherence"] >= 4 else "fail")
    p = cli("run", CONVERSATIONS, "--metrics", "coherence,fluency,groundedness,retrieval,relevance", "--out", out2,
            "--judge-base-url", judge_server.url, env=env)
    assert p.returncode == 0, p.stderr
    metrics = json.loads((out2 / "metrics.json").read_text())
    assert metrics["coherence.scored_rows"] == 20 and metrics["retrieval.scored_rows"] == 20
    assert metrics["groundedness.skipped_rows"] == 0  # every conversation has at least one cited turn


def test_bad_input_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "q", "response": "r"}\n{oops\n')
    p = cli("run", bad, "--metrics", "bleu", "--out", tmp_path / "o")
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "bad.jsonl, row 2: broken JSON line" in p.stderr
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "o").exists()
    for args, msg in [(["--metrics", "nope"], "unknown metric 'nope'"),
                      (["--metrics", "bleu", "--threshold", "bleu=7"], "within 0-1"),
                      (["--metrics", "bleu", "--map", "query=missing"], "no column 'missing'")]:
        p = cli("run", SINGLE, *args, "--out", tmp_path / "o")
        assert p.returncode == 2 and msg in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)
    qr = tmp_path / "qr.jsonl"
    qr.write_text('{"query": "q", "response": "r"}\n')
    p = cli("run", qr, "--metrics", "retrieval", "--out", tmp_path / "o")
    assert p.returncode == 2 and "needs context" in p.stderr and "Traceback" not in p.stderr, p.stderr
    p = cli("run", SINGLE)
    assert p.returncode == 2 and "required" in p.stderr


def test_fail_under_gate(tmp_path):
    p = cli("run", SINGLE, "--metrics", "bleu", "--out", tmp_path / "o", "--fail-under", "bleu=0.99")
    assert p.returncode == 3 and "bleu.bleu_score" in p.stderr
    p = cli("run", SINGLE, "--metrics", "bleu", "--out", tmp_path / "o", "--fail-under", "bleu.pass_rate=0.0")
    assert p.returncode == 0, p.stderr
    p = cli("run", SINGLE, "--metrics", "bleu", "--out", tmp_path / "o", "--fail-under", "bleu.nothing=0.1")
    assert p.returncode == 2


def test_column_mapping_flag(tmp_path):
    data = tmp_path / "mine.csv"
    data.write_text("prompt_text,model_said,gold\nWho?,Ada Lovelace,Ada Lovelace\nWhen?,In 1843,1843\n")
    p = cli("run", data, "--metrics", "f1_score", "--out", tmp_path / "o", "--map", "query=prompt_text",
            "--map", "response=model_said", "--map", "ground_truth=gold")
    assert p.returncode == 0, p.stderr
    rows = read_rows(tmp_path / "o")
    assert [r["outputs.f1_score.f1_score"] for r in rows] == [1.0, pytest.approx(2 / 3)]
    assert rows[0]["inputs.model_said"] == "Ada Lovelace"


@pytest.mark.both_stores
def test_killed_run_resumes_without_judging_a_row_twice(tmp_path, judge_server, store_url):
    judge_server.hold_calls(after=8)  # eight rows judged, the next two calls held: the kill lands mid-run
    out = tmp_path / "out"
    db = tmp_path / "evalhome" / "evals.db" if store_url.startswith("sqlite") else store_url
    env = env_for_subprocess() if store_url.startswith("sqlite") else env_for_subprocess(EVAL_DATABASE_URL=store_url)
    cmd = [sys.executable, "-m", "evaluators", "run", str(SINGLE), "--metrics", "fluency", "--out", str(out),
           "--judge-base-url", judge_server.url, "--concurrency", "2", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: stored_results(db) == 8 and judge_server.held == 2,
                   what="eight results stored and two calls in flight")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert stored_results(db) == 8  # killed part way: what was stored stays, the two held calls left nothing
    store = Store(db if isinstance(db, str) else f"sqlite:///{db}")
    kept = {r.row_idx for r in store.load_results(store.list_runs()[0]["id"]) if r.status == "ok"}
    calls_before = len(judge_server.calls)
    judge_server.release()
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "resuming run" not in p.stdout  # --quiet
    rows = read_rows(out)
    assert len(rows) == 31 and all(r["outputs.fluency.fluency"] in (1, 2, 3, 4, 5) for r in rows)
    ds = load_dataset(SINGLE)
    second = [prompt_text(c) for c in judge_server.calls[calls_before:]]
    assert len(second) == 31 - len(kept)
    for i in kept:
        assert not any(ds.records[i]["response"] in s for s in second), f"row {i} judged twice"
    for i, r in enumerate(rows):  # and the stitched-together result is what the judge said
        prompt = next(prompt_text(c) for c in judge_server.calls if ds.records[i]["response"] in prompt_text(c))
        assert r["outputs.fluency.fluency"] == expected_score(prompt)


def test_metrics_listing_shows_availability():
    p = cli("metrics", CONVERSATIONS)
    assert p.returncode == 0
    line = next(x for x in p.stdout.splitlines() if x.strip().startswith("bleu"))
    assert "needs single-turn rows" in line
    assert "[available]" in next(x for x in p.stdout.splitlines() if x.strip().startswith("retrieval"))


# ---------------------------------------------------------------------------- gates, judge check, templates
def test_gate_names_are_checked_before_the_run(tmp_path, judge_server):
    for gate in ("coherence.nothing=1", "bleu=0.5", "cohrence=3"):
        p = cli("run", SINGLE, "--metrics", "coherence", "--out", tmp_path / "o", "--judge-base-url",
                judge_server.url, "--fail-under", gate)
        assert p.returncode == 2 and p.stderr.startswith("error:") and p.stderr.count("\n") == 1, (gate, p.stderr)
    assert judge_server.requests == []  # no judge call, not even the check
    assert not default_store_made(tmp_path / "evalhome")  # refused before the store was even opened


def test_fail_under_fails_when_measured_rows_errored(tmp_path, judge_server):
    from tests.judge_server import Action

    ds = load_dataset(SINGLE)
    for i in range(3):  # three rows get no usable verdict
        judge_server.on_prompt(ds.records[i]["response"], *[Action(content="no verdict")] * 5)
    base = ["run", SINGLE, "--metrics", "coherence", "--judge-base-url", judge_server.url, "--fail-under",
            "coherence=1"]  # every score is >= 1: only the errored rows can breach this gate
    p = cli(*base, "--out", tmp_path / "a")
    assert p.returncode == 3 and "coherence: 3 of 31 rows errored or unscored (--max-errors 0)" in p.stderr
    metrics = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert metrics["coherence.errored_rows"] == 3 and metrics["coherence.coherence"] >= 1
    # issue 35: a run with errored cells is never the same "completed" as a clean run, in the CLI or the file
    assert ": completed with errors; wrote" in p.stdout
    assert metrics["run.status"] == "completed with errors" and metrics["run.errored_tasks"] == 3
    assert cli(*base, "--out", tmp_path / "a", "--max-errors", "3").returncode == 0
    p = cli(*base, "--out", tmp_path / "a", "--max-errors", "9%")  # 3/31 = 9.7%
    assert p.returncode == 3 and "(--max-errors 9.0%)" in p.stderr


@pytest.mark.parametrize("limit,errored,scored,breached", [
    ("0", 0, 31, False), ("0", 1, 30, True), ("3", 3, 28, False), ("2", 3, 28, True),
    ("10%", 3, 28, False), ("9%", 3, 28, True), ("0%", 1, 99, True), ("100%", 31, 0, False)])
def test_max_errors_count_or_share(limit, errored, scored, breached):
    from evaluators.cli.common import errors_breach, parse_max_errors

    summary = {"errored_rows": errored, "scored_rows": scored, "pending_rows": 0}
    assert (errors_breach(summary, parse_max_errors(limit)) is not None) == breached
    # pending (never judged) rows count as errored
    assert errors_breach({"errored_rows": 0, "scored_rows": 30, "pending_rows": 1}, parse_max_errors("0"))


@pytest.mark.parametrize("bad", ["lots", "-1", "150%", "1.5"])
def test_max_errors_refuses_nonsense(bad):
    from evaluators.cli.common import parse_max_errors
    from evaluators.core.errors import UsageError

    with pytest.raises(UsageError, match="--max-errors takes a count"):
        parse_max_errors(bad)


def test_judge_check_stops_a_wrong_url_key_or_model_at_once(tmp_path):
    import socket

    from tests.judge_server import JudgeServer

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    p = cli("run", SINGLE, "--metrics", "coherence", "--out", tmp_path / "a", "--judge-base-url", dead)
    assert p.returncode == 2  # at once: one refused attempt, never retried (its judge_calls, 1, below)
    assert p.stderr.count("\n") == 1 and f"cannot reach the judge at {dead}" in p.stderr
    with JudgeServer(require_key="sk-right", models={"real-model"}) as server:
        env = env_for_subprocess(WRONG="sk-wrong", RIGHT="sk-right")
        base = ["run", SINGLE, "--metrics", "coherence", "--judge-base-url", server.url]
        p = cli(*base, "--out", tmp_path / "b", "--judge-model", "real-model", "--judge-api-key-env", "WRONG", env=env)
        assert p.returncode == 2 and "refused the key (HTTP 401)" in p.stderr and p.stderr.count("\n") == 1
        p = cli(*base, "--out", tmp_path / "c", "--judge-model", "no-such-model", "--judge-api-key-env", "RIGHT",
                env=env)
        assert p.returncode == 2 and "answered 404: the model does not exist" in p.stderr
        assert "no-such-model" in p.stderr and server.url in p.stderr
        assert server.calls == [] and len(server.probes) == 2  # one check each, never retried, no row judged
        p = cli(*base, "--out", tmp_path / "d", "--judge-model", "real-model", "--judge-api-key-env", "RIGHT", env=env)
        assert p.returncode == 0, p.stderr
        assert len(server.calls) == 31
    engine = sa.create_engine(home_url(tmp_path / "evalhome"))  # the CLI's default store, read in plain SQL
    with engine.connect() as c:
        runs = c.execute(sa.text("select status, judge_calls, error from runs order by created_at")).fetchall()
    engine.dispose()
    assert [r[0] for r in runs] == ["failed", "failed", "failed", "completed"]
    assert [r[1] for r in runs] == [1, 1, 1, 32]  # the check is counted as the call it is
    assert "judge check failed" in runs[1][2]


def test_missing_template_file_is_an_error(tmp_path, judge_server):
    p = cli("run", SINGLE, "--metrics", "coherence", "--out", tmp_path / "o", "--judge-base-url", judge_server.url,
            "--template", "coherence=coherence.md")  # a built-in's name, not a file here: no silent fall back
    assert p.returncode == 2 and "template for coherence: file not found: coherence.md" in p.stderr
    assert judge_server.requests == []


def test_every_refusal_comes_before_the_judge_is_called(tmp_path, judge_server):
    """The judge's check leaves as soon as the run's settings and rows are checked, before the store is
    even imported: a refused input never costs a judge call (and stores nothing)."""
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"query": "q", "response": "r"}\n{oops\n')
    no_response = tmp_path / "q.jsonl"
    no_response.write_text('{"query": "q", "response": "r"}\n{"query": "q2", "response": ""}\n')
    tpl = tmp_path / "mine.md"
    tpl.write_text("Rate {{nonsense}} from 1 to 5.")
    for data, extra, msg in [(SINGLE, ["--threshold", "coherence=9"], "coherence"),
                             (SINGLE, ["--template", f"coherence={tpl}"], "nonsense"),
                             (bad_json, [], "row 2: broken JSON line"),
                             (no_response, [], "row 2"),
                             (SINGLE, ["--map", "query=missing"], "no column 'missing'"),
                             (SINGLE, ["--judge-api-key-env", "NOT_SET_ANYWHERE"], "NOT_SET_ANYWHERE")]:
        p = cli("run", data, "--metrics", "coherence", "--out", tmp_path / "o", "--judge-base-url", judge_server.url,
                *extra)
        assert p.returncode == 2 and msg in p.stderr and p.stderr.count("\n") == 1, (extra, p.stderr)
        assert judge_server.requests == [], (extra, msg)
    assert not (tmp_path / "o").exists() and not default_store_made(tmp_path / "evalhome")
    p = cli("run", SINGLE, "--metrics", "coherence", "--out", tmp_path / "o", "--judge-base-url", judge_server.url)
    assert p.returncode == 0, p.stderr
    assert len(judge_server.probes) == 1 and len(judge_server.calls) == 31
    assert "wrote" in p.stdout and len(read_rows(tmp_path / "o")) == 31  # (written out before the fast exit)


def test_the_cli_checks_a_run_without_loading_sqlalchemy(tmp_path):
    """What the CLI runs before its judge check (loading and checking the rows and the run's settings,
    the key's rules, the check's own client) imports neither SQLAlchemy nor the store."""
    code = ("import sys, argparse; from evaluators.cli import main as cli; "
            "a = cli.build_parser().parse_args(['run', sys.argv[1], '--metrics', 'coherence,f1_score', '--out', 'o', "
            "'--judge-base-url', 'http://127.0.0.1:9/v1', '--threshold', 'coherence=4']); "
            "ds, judged = cli._checked_dataset(a, ['coherence', 'f1_score'], cli._judge_from_args(a), {'coherence': 4.0}, None); "
            "from evaluators.judge.client import EarlyProbe, JudgeClient; import httpx2; "
            "print(len(ds), judged, sorted(m for m in ('sqlalchemy', 'evaluators.store.store', 'evaluators.run.runner', "
            "'evaluators.read.results', 'evaluators.api') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code, str(SINGLE)], cwd=ROOT, capture_output=True, text=True,
                       env=env_for_subprocess())
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "31 True []"


def test_the_cli_reaches_its_judge_before_loading_sqlalchemy():
    """``python -m evaluators run`` sends the judge's check before the store's code is imported:
    the package and the CLI load without SQLAlchemy, the metrics or the results code."""
    code = ("import sys, evaluators, evaluators.cli.main, evaluators.judge.client; "
            "print(sorted(m for m in ('sqlalchemy', 'evaluators.store.store', 'evaluators.run.runner', 'evaluators.read.results') "
            "if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env_for_subprocess())
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
    # the names the package exports still load on first use
    p = subprocess.run([sys.executable, "-c", "from evaluators import Store, evaluate, JudgeConfig; print(Store.__name__)"],
                       cwd=ROOT, capture_output=True, text=True, env=env_for_subprocess())
    assert p.stdout.strip() == "Store", p.stderr


def test_start_up_holds_garbage_collection_only_until_the_calls_start(tmp_path, monkeypatch):
    """``python -m evaluators`` starts with the cyclic collector off (start-up makes long-lived objects,
    no garbage); a run's judge calls, and every other command, find it back on."""
    import gc

    from evaluators.cli import main as cli_mod
    from tests.judge_server import JudgeServer, default_responder

    seen = []

    def responder(prompt, request):
        seen.append(gc.isenabled())
        return default_responder(prompt, request)

    was = gc.isenabled()
    try:
        with JudgeServer(responder=responder) as server:
            gc.disable()
            monkeypatch.setattr(cli_mod, "GC_HELD", True)
            assert cli_mod.main(["run", str(SINGLE), "--metrics", "fluency", "--out", str(tmp_path / "o"),
                                 "--judge-base-url", server.url, "--quiet"]) == 0
        assert len(seen) == 31 and all(seen), seen  # every row call (the check is answered apart)
        assert gc.isenabled() and cli_mod.GC_HELD is False
        gc.disable()
        monkeypatch.setattr(cli_mod, "GC_HELD", True)
        assert cli_mod.main(["metrics"]) == 0
        assert gc.isenabled()
    finally:
        gc.unfreeze()
        (gc.enable if was else gc.disable)()


def test_a_finished_cli_run_has_its_results_page_columns_built_in_the_background(tmp_path, judge_server):
    import os

    home = tmp_path / "evalhome"
    p = cli("run", SINGLE, "--metrics", "coherence,f1_score", "--out", tmp_path / "o", "--judge-base-url",
            judge_server.url, "--quiet", env=env_for_subprocess(EVAL_HOME=str(home)))
    assert p.returncode == 0, p.stderr
    rid = p.stdout.split("run ")[1].split(":")[0]
    from evaluators.read.columns import views_dir
    from evaluators.read.view import open_view

    store = default_store(home)
    views = views_dir(store)  # beside the SQLite file, or (PostgreSQL) under EVAL_HOME

    def built() -> dict:  # the finished files (not one still being written, *.tmpN.npz, renamed when whole)
        return {f.name: f.stat().st_mtime_ns for f in views.glob(f"{rid}-*.npz") if ".tmp" not in f.name}
    wait_until(built, 60, "the run's columns written beside the store")
    before = built()
    view = open_view(store, rid)  # the first open reads them: nothing is built again
    assert built() == before
    assert len(view) == 31 and os.environ.get("OPENAI_API_KEY") is None


def test_every_command_s_help_is_printed():
    """`monitor --help` printed a traceback: a help text's "95% interval" is a %-format to argparse. Every
    command's and subcommand's help is formatted here, as --help formats it."""
    import argparse

    from evaluators.cli.main import build_parser

    def walk(p, path):
        p.format_help()  # raises on a stray % in any help text of this parser's options or subcommands
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    yield path + [name]
                    yield from walk(sub, path + [name])

    seen = list(walk(build_parser(), []))
    assert ["monitor", "series"] in seen and ["monitor", "alert", "add"] in seen and ["redteam"] in seen
