"""Classic metrics computed by a forked worker alongside the runner (evaluators.run.classic_worker).

Every value must be the one a one-process run gives: the same run with the worker forced on and
forced off writes byte-identical rows.jsonl and metrics.json; a worker killed mid-run loses no row.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from evaluators import prepare_run
from evaluators.run.classic_worker import ENV, MIN_TASKS
from evaluators.read.outputs import write_run_outputs
from evaluators.run.runner import Runner
from evaluators.store.store import Store
from tests.conftest import ROOT, SINGLE, env_for_subprocess, store_url_in

METRICS = ["f1_score", "bleu", "gleu", "rouge", "meteor"]


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory):
    """600 distinct (response, ground truth) pairs: each sample response against other rows' ground truths,
    plus a row with no words at all on one side (F1/BLEU edge values)."""
    rows = [json.loads(line) for line in SINGLE.read_text().splitlines()]
    out = []
    for k in range(599):
        a, b = rows[k % len(rows)], rows[(k // len(rows) + k + 1) % len(rows)]
        out.append({"id": f"p{k}", "response": a["response"], "ground_truth": b["ground_truth"]})
    out.append({"id": "blank", "response": "...", "ground_truth": "Dr. Smith arrived at 5 p.m. — “late”."})
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in out))
    return path


def batches(runner) -> int:
    """The batches a run made after its first CLASSIC_WARM_ROWS rows (computed before the fork)."""
    return runner._classic_seq - 1


def run_once(tmp_path, name, data, monkeypatch, setting, on_runner=None):
    """Run the classic metrics on ``data`` with the worker setting; returns (runner, status, out dir)."""
    monkeypatch.setenv(ENV, setting)
    store = Store(store_url_in(tmp_path, name))
    rid = prepare_run(store, str(data), METRICS)
    holder = {}
    runner = Runner(store, rid, on_progress=lambda p: on_runner(holder["r"], p) if on_runner else None)
    holder["r"] = runner
    status = runner.run()
    out = tmp_path / name
    write_run_outputs(store, rid, out)
    return runner, status, out


@pytest.fixture(scope="module")
def one_process(tmp_path_factory, pairs_file):
    mp = pytest.MonkeyPatch()
    try:
        runner, status, out = run_once(tmp_path_factory.mktemp("off"), "off", pairs_file, mp, "0")
    finally:
        mp.undo()
    assert status == "completed" and runner.classic_split is None  # no worker was forked
    return out


def test_worker_on_writes_the_same_files_as_one_process(tmp_path, pairs_file, one_process, monkeypatch):
    runner, status, out = run_once(tmp_path, "on", pairs_file, monkeypatch, "1")
    assert status == "completed"
    here, there = runner.classic_split
    assert there > 0 and here > 0 and here + there == batches(runner)  # both computed some
    for name in ("rows.jsonl", "metrics.json"):
        assert (out / name).read_bytes() == (one_process / name).read_bytes(), name
    rows = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 600 and all(r.get(f"outputs.{m}.{m}_status", "ok") != "error" for r in rows for m in METRICS)


def test_a_killed_worker_loses_no_row(tmp_path, pairs_file, one_process, monkeypatch):
    from evaluators.run.classic_worker import ClassicWorker

    killed = []
    submit = ClassicWorker.submit

    def submit_then_kill(self, key, items, *rows):
        submit(self, key, items, *rows)
        if not killed:  # the real worker process, killed the moment it was handed its first batch
            os.kill(self.pid, signal.SIGKILL)
            killed.append(self.pid)

    monkeypatch.setattr(ClassicWorker, "submit", submit_then_kill)
    runner, status, out = run_once(tmp_path, "killed", pairs_file, monkeypatch, "1")
    assert killed and status == "completed"
    # every batch computed here in the end: the one the dead worker held was taken back
    assert runner.classic_split == (batches(runner), 0) and batches(runner) > 1
    for name in ("rows.jsonl", "metrics.json"):
        assert (out / name).read_bytes() == (one_process / name).read_bytes(), name


def test_setting_and_threshold(tmp_path, monkeypatch, new_store_url):
    from evaluators.run import classic_worker as parallel

    monkeypatch.setenv(ENV, "0")
    assert not parallel.wanted(10**6)
    monkeypatch.setenv(ENV, "2")
    assert parallel.wanted(1)
    monkeypatch.delenv(ENV)
    assert not parallel.wanted(MIN_TASKS - 1)  # too small to pay off: in-process
    assert parallel.wanted(MIN_TASKS) == ((os.cpu_count() or 1) >= 2 and __import__("threading").active_count() == 1)
    monkeypatch.setenv(ENV, "two")
    with pytest.raises(ValueError, match=ENV):
        parallel.wanted(MIN_TASKS)
    # a small run (31 rows x 3 metrics) stays in one process without any setting
    monkeypatch.delenv(ENV)
    store = Store(new_store_url("small"))
    runner = Runner(store, prepare_run(store, SINGLE, ["f1_score", "bleu", "rouge"]))
    assert runner.run() == "completed" and runner.classic_split is None


def test_cancel_with_a_worker_then_resume_gives_the_same_files(tmp_path, pairs_file, one_process, monkeypatch, new_store_url):
    monkeypatch.setenv(ENV, "1")
    store = Store(new_store_url("cancel"))
    rid = prepare_run(store, str(pairs_file), METRICS)
    pids = []

    def progress(p):
        runner = holder[0]
        if runner._classic_worker is not None and runner._classic_worker.outstanding and not pids:
            pids.append(runner._classic_worker.pid)
            # what the runner's watcher does on a cancel request (it polls the store every half second,
            # longer than this small run lasts): batches are out at the worker at this moment
            runner._cancelled = True

    holder = [Runner(store, rid, on_progress=progress)]
    assert holder[0].run() == "cancelled"
    assert pids and not os.path.exists(f"/proc/{pids[0]}/status")  # the worker ended with the run (and was reaped)
    assert 0 < len(store.done_keys(rid)) < 600 * len(METRICS)
    assert Runner(store, rid).run() == "completed"
    write_run_outputs(store, rid, tmp_path / "out")
    for name in ("rows.jsonl", "metrics.json"):
        assert (tmp_path / "out" / name).read_bytes() == (one_process / name).read_bytes(), name


def live_run(tmp_path, name, data, monkeypatch, setting, metrics=METRICS):
    """A run whose rows.jsonl and metrics.json are written as its results are (what the CLI does);
    returns (store, run id, out dir, the live writer's summary or None when it was abandoned)."""
    from evaluators.read.outputs import LiveRunOutputs

    monkeypatch.setenv(ENV, setting)
    store = Store(store_url_in(tmp_path, name))
    rid = prepare_run(store, str(data), metrics)
    out = tmp_path / name
    live = LiveRunOutputs(store, rid, out)
    assert Runner(store, rid, outputs=live).run() == "completed"
    return store, rid, out, live.finish()


@pytest.mark.parametrize("setting", ["1", "0"])
def test_files_written_during_the_run_equal_the_files_read_from_the_store(tmp_path, pairs_file, one_process,
                                                                          monkeypatch, setting):
    """The CLI writes a fresh classic run's rows.jsonl from the results as they are stored (batches come
    back out of order from the worker); the bytes are those read back from the store after the run."""
    store, rid, out, summary = live_run(tmp_path, "live", pairs_file, monkeypatch, setting)
    assert summary is not None  # written live, not abandoned
    assert summary.metrics() == json.loads((out / "metrics.json").read_text())
    write_run_outputs(store, rid, tmp_path / "from_store")
    for name in ("rows.jsonl", "metrics.json"):
        assert (out / name).read_bytes() == (tmp_path / "from_store" / name).read_bytes(), name
        assert (out / name).read_bytes() == (one_process / name).read_bytes(), name
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "rows.jsonl"]  # no temporary file left


def test_live_files_give_way_to_the_store_when_the_run_does_not_compute_every_row(tmp_path, pairs_file, one_process,
                                                                                 monkeypatch, new_store_url):
    """A resumed run (part of its results from before) abandons the live files: nothing is written and no
    temporary file is left, so the caller reads the store."""
    from evaluators.read.outputs import LiveRunOutputs

    monkeypatch.setenv(ENV, "0")
    store = Store(new_store_url("resume"))
    rid = prepare_run(store, str(pairs_file), METRICS)
    store.write_results(rid, [r for r in _first_rows(pairs_file, 7)])
    out = tmp_path / "out"
    live = LiveRunOutputs(store, rid, out)
    assert Runner(store, rid, outputs=live).run() == "completed"
    assert live.finish() is None and list(out.iterdir()) == []
    write_run_outputs(store, rid, out)  # what the CLI does then
    for name in ("rows.jsonl", "metrics.json"):
        assert (out / name).read_bytes() == (one_process / name).read_bytes(), name


def _first_rows(data, n):
    """Results of the first ``n`` rows of every metric, computed here (as a run killed early leaves them)."""
    from evaluators.core.registry import get_metric
    from evaluators.store.schema import Result

    rows = [json.loads(x) for x in data.read_text().splitlines()[:n]]
    out = []
    for i, row in enumerate(rows):
        for m in METRICS:
            spec = get_metric(m)
            v = spec.compute({"response": row["response"], "ground_truth": row["ground_truth"]})
            out.append(Result(i, m, 0, "ok", value=v[spec.primary], outputs=v, meta={"signature": spec.signature()}))
    return out


def test_a_lost_classic_task_still_fails_the_run_with_live_files(tmp_path, pairs_file, monkeypatch, new_store_url):
    """With live files the runner skips re-reading every stored key at the end only when the live files
    saw every row's every result; a task lost on the way is still found: the run ends failed, nothing
    is written live (the files then come from the store, the lost task an error row)."""
    from evaluators.read.outputs import LiveRunOutputs

    class Leaky(Runner):
        dropped = False

        def _write_classic(self, seq, part, outcomes):
            if not self.dropped and len(part) > 7:  # drops one task of its first full batch on the floor
                self.dropped = True
                part, outcomes = part[:3] + part[4:], outcomes[:3] + outcomes[4:]
            super()._write_classic(seq, part, outcomes)

    monkeypatch.setenv(ENV, "0")
    store = Store(new_store_url("leak"))
    rid = prepare_run(store, str(pairs_file), METRICS)
    live = LiveRunOutputs(store, rid, tmp_path / "out")
    runner = Leaky(store, rid, outputs=live)
    assert runner.run() == "failed" and runner.dropped
    assert "1 task(s) ended without a result" in store.get_run(rid)["error"]
    assert live.finish() is None and list((tmp_path / "out").iterdir()) == []


def test_live_files_with_a_killed_worker(tmp_path, pairs_file, one_process, monkeypatch):
    """The batches a killed worker held are computed here, in walk order for the live files: same bytes."""
    from evaluators.run.classic_worker import ClassicWorker

    killed = []
    submit = ClassicWorker.submit

    def submit_then_kill(self, key, items, *rows):
        submit(self, key, items, *rows)
        if len(self._sent) == 2 and not killed:  # two batches out when it dies
            os.kill(self.pid, signal.SIGKILL)
            killed.append(self.pid)

    monkeypatch.setattr(ClassicWorker, "submit", submit_then_kill)
    store, rid, out, summary = live_run(tmp_path, "live_killed", pairs_file, monkeypatch, "1")
    assert killed and summary is not None
    for name in ("rows.jsonl", "metrics.json"):
        assert (out / name).read_bytes() == (one_process / name).read_bytes(), name


# ---------------------------------------------------------------- the CLI's early worker (parallel.start_early)


def cli_run(tmp_path, name, data, monkeypatch, setting="1"):
    """``python -m evaluators run DATA --metrics ...`` in this process; returns (exit code, out dir, store)."""
    from evaluators.cli import main as cli

    monkeypatch.setenv(ENV, setting)
    out, db = tmp_path / name, store_url_in(tmp_path, name)
    code = cli.main(["run", str(data), "--metrics", ",".join(METRICS), "--out", str(out), "--db", db,
                     "--fresh", "--quiet"])
    return code, out, Store(db)


def spy_early(monkeypatch):
    """Record the early workers the CLI starts (and optionally act on each as it starts)."""
    from evaluators.run import classic_worker as parallel

    started, start = [], parallel.start_early

    def spy(*a, **k):
        w = start(*a, **k)
        started.append(w)
        return w

    monkeypatch.setattr(parallel, "start_early", spy)
    return started


def rows_asked_ahead(monkeypatch):
    """The highest row number the early worker has read while computing ahead (-1: none yet), in memory
    shared with it. The worker, forked from this process (this patch included), reads its rows through
    ``data.load_dataset_streaming(...).canonical(i)``, and row i + 1 only once row i's every metric is
    computed and kept: a value of 1 or more means row 0's outcomes wait in the worker to be used."""
    import multiprocessing as mp

    from evaluators.data import loading as data

    asked = mp.get_context("fork").Value("l", -1)
    here, load = os.getpid(), data.load_dataset_streaming

    def counted_load(*a, **k):
        ds = load(*a, **k)
        if os.getpid() != here:  # the worker's read (the run's own load is left alone)
            canonical = ds.canonical

            def counted(i):
                with asked.get_lock():
                    asked.value = max(asked.value, i)
                return canonical(i)

            ds.canonical = counted
        return ds

    monkeypatch.setattr(data, "load_dataset_streaming", counted_load)
    return asked


def check_after_rows_ahead(monkeypatch, then=None) -> list[bool]:
    """The CLI's load and check of the file held back until the early worker has computed a row ahead
    (at most 60 s), then ``then()`` before it runs. Returns a list that gets whether the row came, for
    the test to assert (an assertion raised inside the CLI would only become its exit code)."""
    from evaluators.cli import main as cli
    from tests.procs import wait_until

    asked, check, came = rows_asked_ahead(monkeypatch), cli._checked_dataset, []

    def held(*a, **k):
        try:
            wait_until(lambda: asked.value >= 1, timeout=60, what="a row computed ahead")
            came.append(True)
        except AssertionError:
            came.append(False)
        if then is not None:
            then()
        return check(*a, **k)

    monkeypatch.setattr(cli, "_checked_dataset", held)
    return came


def test_early_worker_rows_computed_ahead_give_the_same_files(tmp_path, pairs_file, one_process, monkeypatch):
    """The worker the CLI forks before loading computes rows ahead while the file is checked and stored;
    the run uses them (outcomes answered from them) and writes the bytes of a one-process run."""
    started = spy_early(monkeypatch)
    came = check_after_rows_ahead(monkeypatch)
    code, out, _ = cli_run(tmp_path, "early", pairs_file, monkeypatch)
    assert came == [True] and code == 0 and started and started[0] is not None
    assert started[0].kept >= len(METRICS)  # row 0's outcomes (at least) came from the rows computed ahead
    for name in ("rows.jsonl", "metrics.json"):
        assert (out / name).read_bytes() == (one_process / name).read_bytes(), name


def test_early_worker_rows_of_a_file_changed_meanwhile_are_not_used(tmp_path, pairs_file, one_process, monkeypatch):
    """Rows computed ahead from the file as it was are used only where the run's row has the same values:
    a file rewritten between the worker's read and the run's load gives the new file's values."""
    data = tmp_path / "data.jsonl"
    rows = [json.loads(x) for x in pairs_file.read_text().splitlines()]
    changed = [dict(r, response=r["response"] + " Indeed.") if k % 2 else r for k, r in enumerate(rows)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    started = spy_early(monkeypatch)
    came = check_after_rows_ahead(monkeypatch,
                                  then=lambda: data.write_text("".join(json.dumps(r) + "\n" for r in changed)))
    code, out, _ = cli_run(tmp_path, "changed", data, monkeypatch)
    assert came == [True] and code == 0 and started[0] is not None
    assert started[0].kept >= len(METRICS)  # the unchanged rows' were used (row 0's at least)
    monkeypatch.setenv(ENV, "0")
    ref = tmp_path / "ref.jsonl"
    ref.write_text(data.read_text())
    code, ref_out, _ = cli_run(tmp_path, "ref", ref, monkeypatch, "0")
    assert code == 0
    for name in ("rows.jsonl", "metrics.json"):
        assert (out / name).read_bytes() == (ref_out / name).read_bytes(), name
    assert (out / "rows.jsonl").read_bytes() != (one_process / "rows.jsonl").read_bytes()


def test_a_refused_file_ends_the_early_worker_and_stores_nothing(tmp_path, pairs_file, monkeypatch, capsys):
    """A file refused by the check (its last row lacks the ground truth) is refused as before: exit 2, the
    row and field named, nothing stored, and the worker computing ahead is ended."""
    data = tmp_path / "bad.jsonl"
    rows = [json.loads(x) for x in pairs_file.read_text().splitlines()]
    rows[-1].pop("ground_truth")
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    started = spy_early(monkeypatch)
    code, out, store = cli_run(tmp_path, "bad", data, monkeypatch)
    err = capsys.readouterr().err
    assert code == 2 and "ground_truth" in err and "600" in err, err
    assert started and started[0] is not None and not started[0]._proc.is_alive()
    assert store.list_runs() == [] and store.list_datasets() == [] and not out.exists()


def test_a_killed_early_worker_loses_no_row(tmp_path, pairs_file, one_process, monkeypatch):
    """The early worker killed while it computes ahead: the run computes its rows itself, same bytes."""
    started = spy_early(monkeypatch)

    def kill():
        os.kill(started[0].pid, signal.SIGKILL)

    came = check_after_rows_ahead(monkeypatch, then=kill)
    code, out, _ = cli_run(tmp_path, "early_killed", pairs_file, monkeypatch)
    assert came == [True] and code == 0 and started[0].broken and started[0].kept == 0
    for name in ("rows.jsonl", "metrics.json"):
        assert (out / name).read_bytes() == (one_process / name).read_bytes(), name


def test_same_values_means_same_types():
    from evaluators.run.classic_worker import _same

    a = {"response": "a b", "ground_truth": "b", "context": None}
    assert _same(a, dict(a))
    assert not _same(a, dict(a, response="a  b"))
    assert not _same(a, dict(a, context=""))
    assert not _same({"x": 1}, {"x": 1.0}) and not _same({"x": 1}, {"x": True}) and _same({"x": [1]}, {"x": [1]})
    assert not _same(a, {"response": "a b", "ground_truth": "b"})


def test_a_worker_whose_runner_was_killed_ends(tmp_path):
    """The runner's process killed (SIGKILL: no clean-up runs) while its worker waits for a batch or computes
    rows ahead: the worker notices within about a second and ends instead of waiting forever."""
    import subprocess
    import sys

    from tests.conftest import ROOT, env_for_subprocess
    from tests.procs import wait_until

    computed = tmp_path / "computed"  # a byte a row the worker computing ahead has computed
    code = (
        "import sys, time\n"
        "from evaluators.run import classic_worker as parallel\n"
        "def slow(v):\n"
        "    with open(sys.argv[1], 'a') as f:\n"
        "        f.write('.')\n"
        "    time.sleep(0.01)\n"  # (a metric that takes its time: the worker is still at it when we look)
        "    return {}\n"
        "idle = parallel.ClassicWorker({'f1_score': lambda v: {}})\n"
        "ahead = parallel.ClassicWorker({'f1_score': slow}, ahead=lambda: ((i, {}) for i in range(10**6)))\n"
        "print(idle.pid, ahead.pid, flush=True)\n"
        "time.sleep(60)\n"  # (until killed)
    )
    p = subprocess.Popen([sys.executable, "-c", code, str(computed)], cwd=ROOT, env=env_for_subprocess(),
                         stdout=subprocess.PIPE, text=True)
    pids = [int(x) for x in p.stdout.readline().split()]

    def alive(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
        except FileNotFoundError:
            return False

    try:
        assert len(pids) == 2
        wait_until(lambda: computed.exists() and computed.stat().st_size >= 2, what="rows computed ahead")
        assert all(alive(pid) for pid in pids)
        p.kill()
        p.wait()
        # each notices within about a second (PARENT_CHECK); 30 s leaves a busy machine room
        wait_until(lambda: not any(alive(pid) for pid in pids), timeout=30, what=f"workers {pids} to end")
    finally:
        p.kill()
        p.wait()
        for pid in pids:  # (when the test fails: no process of ours left behind)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_classic_cli_run_imports_no_scipy_pandas_plotly_or_openai(tmp_path):
    """A run of the classic metrics starts without the heavy modules it never uses (start-up time);
    NLTK's optional SciPy import is skipped and SciPy still imports afterwards."""
    code = (
        "import sys\n"
        f"sys.argv = ['evaluators', 'run', {str(SINGLE)!r}, '--metrics', 'f1_score,bleu,gleu,rouge,meteor',"
        f" '--out', {str(tmp_path / 'out')!r}, '--db', 'sqlite:///{tmp_path / 'x.db'}', '--quiet']\n"
        # the CLI's own entry (`python -m evaluators` runs it, then leaves by os._exit, which would end this check)
        "from evaluators.cli.main import main\nassert main() == 0\n"
        "print(sorted(m for m in ('scipy', 'pandas', 'plotly', 'openai', 'streamlit') if m in sys.modules))\n"
        "import scipy.stats; print('nltk' in sys.modules)\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env_for_subprocess(), capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-2:] == ["[]", "True"]
    assert (tmp_path / "out" / "rows.jsonl").exists()
