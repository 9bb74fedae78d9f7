"""Users' templates rendered under bounds (evaluators.metrics.custom.bounded): the issue's runaways (a nested
``range`` loop, ``'x' * 50000000``, a list multiplied to gigabytes) each fail their row with a sentence saying
why, in a run, on the New metric page's trial, in the estimate and at save; the process stays healthy and no
render process is left spinning. Real parts: the loopback judge, a real store, the real render process."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evaluators import evaluate
from evaluators.core import registry
from evaluators.core.errors import UsageError
from evaluators.metrics.custom import bounded
from evaluators.metrics.custom.bounded import MAX_CHARS, RenderBoundError, renderer
from tests.apptest import app, shown_text
from tests.conftest import ROOT, env_for_subprocess
from tests.procs import wait_until

pytestmark = pytest.mark.usefixtures("forget_custom_metrics")

NESTED_SILENT = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"  # time bound
NESTED = ("{% for i in range(100000) %}{% for j in range(100000) %}" + "x" * 100  # the size bound, as it goes
          + "{% endfor %}{% endfor %}")
BIG_STRING = "{{ 'x' * 50000000 }}"
BIG_LIST = "{% set a = [0] * 1000 %}{% set b = a * 2000000 %}{{ b | length }}"  # 2e9 items: ~16 GB of pointers
# what each row's error says (the bound it met)
WHY = {"loop_time": "ran past its 1 s of CPU time", "loop_size": f"passed {MAX_CHARS:,} characters",
       "big_string": "repeats a str of 1 to 50,000,000 items", "big_list": "repeats a list of 1,000 to 2,000,000,000"}
BODIES = {"loop_time": NESTED_SILENT, "loop_size": NESTED, "big_string": BIG_STRING, "big_list": BIG_LIST}
ROWS = [{"query": "Am I covered?", "response": "Yes, under policy P-1234."},
        {"query": "Can I cancel?", "response": "Within 14 days."}]


def prompty(name: str, body: str) -> str:
    return (f"---\nname: {name}\ninputs:\n  response: {{type: string}}\n---\nuser:\nJudge this answer: {{{{response}}}}\n"
            f"{body}\nReply {{\"reason\": \"...\", \"score\": <1-5>}}\n")


def _write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def _state(pid: int) -> str:
    """The process's state letter in /proc (R running, S sleeping...), '' once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def _idle_render_process() -> None:
    """The render process, if one runs, is asleep waiting for the next render (not left at 100% of a core)."""
    pid = renderer().pid
    if pid is not None:
        wait_until(lambda: _state(pid) in ("S", ""), timeout=30, what="the render process idle")


def test_runaway_templates_fail_their_rows_not_the_run(judge_server, store, tmp_path):
    files = [_write(tmp_path, f"{n}.prompty", prompty(n, b)) for n, b in BODIES.items()]
    files.append(_write(tmp_path, "sound.prompty", prompty("sound", "{% if response %}(it has text){% endif %}")))
    res = evaluate(ROWS, [*BODIES, "sound"], judge={"model": "m", "provider": "compatible",
                                                   "base_url": judge_server.url, "max_retries": 0},
                   store=store, metric_files=files)
    results = {(r.metric, r.row_idx): r for r in store.load_results(res.run_id)}
    for name, why in WHY.items():
        for row in (0, 1):
            r = results[(name, row)]
            assert r.status == "error" and why in r.error, (name, r.error)
            assert r.error.startswith("RenderBoundError: ")
    # the sound metric in the same run was judged, each prompt as rendered; nothing else reached the judge
    assert [results[("sound", i)].status for i in (0, 1)] == ["ok", "ok"]
    sent = [c["messages"][-1]["content"] for c in judge_server.calls]
    assert sorted(sent) == sorted(f"Judge this answer: {r['response']}\n(it has text)Reply "  # (trim_blocks)
                                  '{"reason": "...", "score": <1-5>}' for r in ROWS)
    assert res.status == "completed" and store.get_run(res.run_id)["tasks_errored"] == 8
    _idle_render_process()


def test_a_template_that_ran_away_on_three_rows_fails_the_rest_at_once(tmp_path):
    body = "user:\n" + NESTED_SILENT + "{{ response }}"
    got = bounded.render_rows(body, [{"response": str(i)} for i in range(6)])
    assert all(isinstance(g, RenderBoundError) for g in got)
    assert [("CPU time for one row" in str(g)) for g in got] == [True] * 3 + [False] * 3
    assert all(f"on {bounded.RUNAWAY_ROWS} rows already" in str(g) for g in got[3:])
    # the process is healthy: a sound template renders in it at once
    assert bounded.render_rows("user:\n{{ response }}!", [{"response": "ok"}]) == ["user:\nok!"]
    _idle_render_process()


def test_memory_bound_ends_the_render_process_and_the_next_row_gets_a_new_one():
    grow = "user:\n{{ 'x' | center(2000000000) }}"  # one 2 GB string, past the 1 GiB the process may have
    assert bounded.render_rows("user:\n{{ 1 + 1 }}", [{}]) == ["user:\n2"]
    before = renderer().pid
    got = bounded.render_rows(grow, [{}])
    assert isinstance(got[0], RenderBoundError) and "MiB a render may use" in str(got[0])
    assert bounded.render_rows("user:\n{{ 2 + 3 }}", [{}]) == ["user:\n5"]
    assert renderer().pid not in (None, before)


def test_a_render_process_killed_from_outside_is_started_again_for_the_next_row():
    import os
    import signal

    assert bounded.render_rows("user:\n{{ 1 }}", [{}]) == ["user:\n1"]
    pid = renderer().pid
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: _state(pid) in ("Z", ""), timeout=30, what="the render process dead")
    assert bounded.render_rows("user:\n{{ 2 }}", [{}]) == ["user:\n2"] and renderer().pid != pid


def test_our_templates_form_is_bounded_by_size_before_it_is_made():
    from evaluators.judge.templates import parse_template

    text = "[user]\n" + "{{response}}\n" * 2000
    values = {"response": "x" * 5000}  # 2,000 x 5,000 = 10,000,000 characters
    with pytest.raises(RenderBoundError, match=r"would have 10,0\d\d,\d\d\d characters, past the 5,000,000"):
        parse_template(text, "mine.md", bounded=True).render(values)
    assert len(parse_template(text, "ours.md").render(values)[0]["content"]) > MAX_CHARS  # ours: not bounded


def test_the_estimate_renders_a_sample_of_a_prompty_metrics_rows(store, judge_config, tmp_path):
    from evaluators.api import ESTIMATE_SAMPLE, estimate_run
    from evaluators.data.loading import load_dataset
    from evaluators.judge.tokens import tokenizer_for
    from evaluators.metrics.custom import register_metric_files
    from evaluators.metrics.custom.prompty import split_messages
    from evaluators.run.spec import RunSpec

    rows = [{"query": "q", "response": f"answer {i:04d}"} for i in range(1000)]  # every prompt the same length
    register_metric_files([_write(tmp_path, "sound.prompty", prompty("sound", "")),
                           _write(tmp_path, "slow.prompty", prompty("slow", NESTED_SILENT))])
    ds = load_dataset(rows)
    before = renderer().rendered
    est = estimate_run(store, ds, RunSpec(["sound"], {}, judge_config))
    assert renderer().rendered - before == ESTIMATE_SAMPLE  # not 1,000
    one = split_messages(bounded.render_rows(registry.get_metric("sound").templates.inline[1],
                                             [{"response": "answer 0000"}])[0])
    assert est["judge_calls"] == 1000
    assert est["prompt_tokens"] == 1000 * tokenizer_for(judge_config.model).count_messages(one)
    # a runaway template's estimate ends (its sample fails), counting no call for what cannot be rendered
    assert estimate_run(store, ds, RunSpec(["slow"], {}, judge_config))["judge_calls"] == 0
    _idle_render_process()


def test_saving_a_runaway_template_is_refused_after_a_trial_render(store):
    with pytest.raises(UsageError) as e:
        store.save_metric(prompty("big", BIG_STRING), "prompty")
    assert str(e.value).startswith("the definition:6: template: a trial render on a sample row failed: ")
    assert WHY["big_string"] in str(e.value)
    assert store.saved_metrics() == []
    assert store.save_metric(prompty("fine", "{{ 'x' * 3 }}"), "prompty")["version"] == 1


def test_metrics_add_refuses_a_runaway_template(tmp_path):
    path = _write(tmp_path, "loop.prompty", prompty("loop", BIG_LIST))
    db = f"sqlite:///{tmp_path / 'evals.db'}"
    p = subprocess.run([sys.executable, "-m", "evaluators", "metrics", "add", path, "--db", db], cwd=ROOT,
                       capture_output=True, text=True, env=env_for_subprocess(), timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert f"{path}:6: template: a trial render on a sample row failed:" in p.stderr or \
           "a trial render on a sample row failed" in p.stderr, p.stderr
    assert WHY["big_list"] in p.stderr


def test_the_new_metric_page_tries_and_refuses_a_runaway_template(judge_server, home_store, fresh_caches):
    # fresh_caches: without it the page's cached store could be an earlier test's in this worker, whose first
    # dataset had 3 rows (3 errors of 5 in two PostgreSQL passes, by test order)
    # this process's renderer remembers templates that ran away (and sends them no more rows): an earlier test
    # that ran the same loop here (on PostgreSQL, the runner renders in this process) must not decide this one
    renderer()._runaways.clear()
    at = app("pages/metric.py")
    at.selectbox(key="metric.start").set_value("A metric file's text (paste it)").run()
    at.selectbox(key="metric.format").set_value("Prompty (.prompty)").run()
    at.text_area(key="metric.text").set_value(prompty("looping", NESTED_SILENT)).run()
    at.selectbox(key="judge.provider").set_value("OpenAI-compatible base URL").run()
    at.text_input(key="judge.base_url").set_value(judge_server.url).run()
    at.text_input(key="judge.model").set_value("loopback-judge").run()
    at.button(key="metric.try").click().run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 5 and all("the prompt could not be rendered: " in e for e in errors), errors
    assert all(WHY["loop_time"] in e for e in errors) and judge_server.calls == []
    _idle_render_process()
    at.button(key="metric.save").click().run()
    assert "a trial render on a sample row failed" in " ".join(e.value for e in at.error)
    assert home_store.saved_metrics() == [] and "Row 1: no value" in shown_text(at)


def test_a_queue_worker_fails_a_runaway_template_s_rows_and_hears_cancel(postgres, judge_server, tmp_path):
    """On the job queue: the runaway metric's 31 rows fail, fluency's are judged, the worker lives on; a second
    run whose judge calls (coherence: none cached) are held is cancelled while (or just after) its runaway rows
    render."""
    from evaluators.store.store import Store
    from tests.conftest import SINGLE, wait_for_run
    from tests.test_queue import cli, stop, worker

    url = postgres.new_database()
    store = Store(url)
    first = _write(tmp_path, "loop.prompty", prompty("loop", NESTED_SILENT))
    p = cli("submit", SINGLE, "--metrics", "loop,fluency", "--metric-file", first, "--judge-base-url",
            judge_server.url, "--chunk-rows", "10", url=url)
    assert p.returncode == 0, p.stderr
    rid = p.stdout.split()[-1]
    w = worker(url)
    try:
        assert wait_for_run(store, rid, timeout=180)["status"] == "completed"
        results = store.load_results(rid)
        loop = [r for r in results if r.metric == "loop"]
        assert len(loop) == 31 and all(r.status == "error" and WHY["loop_time"] in r.error for r in loop)
        assert sorted(r.row_idx for r in results if r.metric == "fluency" and r.status == "ok") == list(range(31))
        assert w.poll() is None  # the worker is alive and takes the next run
        judge_server.hold_calls(after=0)
        second = _write(tmp_path, "loop2.prompty", prompty("loop2", NESTED_SILENT + "{{ response }}"))
        p = cli("submit", SINGLE, "--metrics", "loop2,coherence", "--metric-file", second, "--judge-base-url",
                judge_server.url, "--chunk-rows", "31", url=url)
        rid2 = p.stdout.split()[-1]
        wait_until(lambda: store.get_run(rid2)["status"] == "running", timeout=120, what="the second run taken")
        store.request_cancel(rid2)
        assert wait_for_run(store, rid2, timeout=120)["status"] == "cancelled"
    finally:
        judge_server.release()
        stop(w)


def test_a_cli_run_records_each_runaway_row_s_reason_and_completes(judge_server, tmp_path):
    import json

    from tests.conftest import SINGLE

    path = _write(tmp_path, "big.prompty", prompty("big", BIG_STRING))
    p = subprocess.run([sys.executable, "-m", "evaluators", "run", str(SINGLE), "--metrics", "big,fluency",
                        "--metric-file", path, "--judge-base-url", judge_server.url, "--out", str(tmp_path / "out"),
                        "--db", f"sqlite:///{tmp_path / 'evals.db'}"], cwd=ROOT, capture_output=True, text=True,
                       env=env_for_subprocess(), timeout=180)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    rows = [json.loads(x) for x in (tmp_path / "out" / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 31 and all(r["outputs.fluency.fluency"] is not None for r in rows)
    assert max(len(c["messages"][-1]["content"]) for c in judge_server.calls) < 20_000  # no 50 MB prompt sent
    with __import__("sqlite3").connect(tmp_path / "evals.db") as c:
        errors = [e for (e,) in c.execute("select error from results where metric = 'big'")]
    assert len(errors) == 31 and all(WHY["big_string"] in e for e in errors)


def test_a_template_error_on_some_rows_fails_those_rows_only(judge_server, store, tmp_path):
    """A user's template that cannot render one row (Jinja's own UndefinedError: the row's answer has no fourth
    word) fails that row with Jinja's message; the row it can render is judged, and the run completes."""
    f = _write(tmp_path, "fourth.prompty", prompty("fourth", "Its fourth word: {{ response.split()[3].upper() }}"))
    res = evaluate(ROWS, ["fourth"], judge={"model": "m", "provider": "compatible", "base_url": judge_server.url,
                                            "max_retries": 0}, store=store, metric_files=[f])
    by_row = {r.row_idx: r for r in store.load_results(res.run_id)}
    assert by_row[0].status == "ok"  # "Yes, under policy P-1234." has four words
    assert by_row[1].status == "error" and by_row[1].error == (  # "Within 14 days.": three words
        "RenderBoundError: the template failed on this row: UndefinedError: list object has no element 3")
    assert res.status == "completed"
