"""All data access of the dashboard: one store per process, cached reads keyed by what they are."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from evaluators import Store, load_dataset
from evaluators.core.errors import StoreVersionError
from evaluators.read.results import open_results
from evaluators.data.loading import Inspection, ParsedFile, inspect_parsed, read_upload, without_rows
from evaluators.read.results import RunResults
from evaluators.read.view import open_view

SAMPLES = Path(__file__).resolve().parent.parent / "data"


def store() -> Store:
    """The store (``EVAL_DATABASE_URL`` or the local SQLite file), with the bundled samples in it. A store
    older or newer than this code stops the page with what to do (nothing is changed in it)."""
    try:
        return _store()
    except StoreVersionError as e:
        st.error(str(e), icon=":material/database:")
        st.stop()


@st.cache_resource(show_spinner=False)
def _store() -> Store:
    s = Store()
    for path in sorted(SAMPLES.glob("*.jsonl")):
        s.save_dataset(load_dataset(path))  # stored once: datasets are kept by content
    return s


@st.cache_data(ttl=2, show_spinner=False)
def _runs(url: str) -> list[dict]:
    return store().run_rows()


@st.cache_data(ttl=2, show_spinner=False)
def _datasets(url: str) -> list[dict]:
    return store().list_datasets()


def _fresh(cached, wanted: str | None) -> list[dict]:
    """A cached list, re-read at once when the URL names an item it lacks (added moments ago)."""
    out = cached(store().url)
    if wanted and wanted not in {x["id"] for x in out}:
        cached.clear()
        out = cached(store().url)
    return out


def runs(wanted: str | None = None, archived: bool = False) -> list[dict]:
    """Runs, newest first; archived ones only if ``archived`` or named by ``wanted`` or the link's ``runs`` (a link
    to one still opens it: Compare opened on archived runs from Runs' "Show archived" included)."""
    named = {wanted, *(st.query_params.get("runs") or "").split(",")}
    return [r for r in _fresh(_runs, wanted) if archived or not r.get("archived_at") or r["id"] in named]


def datasets(wanted: str | None = None, archived: bool = False) -> list[dict]:
    """Datasets, newest first; archived ones only if ``archived`` or named by ``wanted``."""
    return [d for d in _fresh(_datasets, wanted) if archived or not d.get("archived_at") or d["id"] == wanted]


def datasets_to_judge(wanted: str | None = None) -> tuple[list[dict], set[str], str | None]:
    """What New evaluation offers: (the datasets, newest first, without imported judgment sets; the ids of those
    sets, whose rows are a judge's verdicts already made, not answers to judge; the dataset of the newest run
    that is not an import, None if none)."""
    runs_ = runs(archived=True)  # an archived import's dataset is still a judgment set
    imported = {r["dataset_id"] for r in runs_ if (r["spec"] or {}).get("imported")}
    last = next((r["dataset_id"] for r in runs_ if not (r["spec"] or {}).get("imported")), None)
    return [d for d in datasets(wanted) if d["id"] not in imported], imported, last


def completed_runs(wanted: str | None = None, at_least: int = 2) -> list[dict]:
    """Completed runs, newest first; a cached list with fewer than ``at_least`` is read again before
    a page says there are not enough (a run may have completed within the cache's 2 s)."""
    out = [r for r in runs(wanted) if r["status"] == "completed"]
    if len(out) < at_least:
        _runs.clear()
        out = [r for r in runs(wanted) if r["status"] == "completed"]
    return out


def forget_lists() -> None:
    """After this session adds a run or a dataset."""
    _runs.clear()
    _datasets.clear()


def run(run_id: str) -> dict | None:
    try:
        return store().get_run(run_id)
    except KeyError:
        return None


@st.cache_resource(show_spinner=False, max_entries=32, ttl=600)
def _results(run_id: str, version: tuple) -> RunResults:
    return open_results(store(), run_id)


@st.cache_resource(show_spinner=False, max_entries=8, ttl=600)
def _view(run_id: str, version: tuple) -> RunResults:
    # columns, not one object per result: fast and small on runs of any size (evaluators.read.view)
    return open_view(store(), run_id, search_in_background=True)


def results(run: dict, thresholds: dict[str, float]) -> RunResults:
    """A run's results with ``thresholds`` applied: read once per state of the run (a new result
    re-reads), while a threshold change only re-derives verdicts."""
    out = _view(run["id"], _version(run)).with_thresholds(thresholds)
    out.state = (run["id"], _version(run))  # names this state of the run for the figures kept below
    return out


@st.cache_resource(show_spinner=False, max_entries=256)
def _figure(kind: str, state: tuple, shown: tuple, _build):
    return _build()


def figure(res: RunResults, kind: str, shown: tuple, build):
    """A chart of a run, built once per state of the run and per what it shows (``shown``: the
    metric, thresholds, target...), for every session: a dozen charts built on every script run are
    most of a Results page's script run. Figures (Plotly figures, Vega-Lite dicts) are never mutated."""
    state = getattr(res, "state", None)
    return build() if state is None else _figure(kind, state, shown, build)


@st.cache_resource(show_spinner=False, max_entries=2)
def _parsed(file_id: str, name: str, _upload) -> ParsedFile:
    # getvalue() hands over the upload's own bytes (no copy); the parsed rows are kept once per file
    return read_upload(_upload.getvalue(), name)


@st.cache_resource(show_spinner=False, max_entries=4)
def _inspection(file_id: str, name: str, mapping: tuple, _upload, left_out: tuple = ()) -> Inspection:
    # rows that need no conversion are shared with _parsed's, so a remapping costs no second copy
    parsed = _parsed(file_id, name, _upload)
    return inspect_parsed(without_rows(parsed, left_out) if left_out else parsed, dict(mapping) or None)


def inspect_upload(upload, mapping: dict[str, str | None] | None = None, left_out: tuple[int, ...] = ()) -> Inspection:
    """An upload read once per file, and mapped and checked once per mapping (the user's changes to the
    detected one; None: no column for that field) and rows ``left_out`` (file rows), not on every rerun."""
    return _inspection(upload.file_id, upload.name, tuple(sorted((mapping or {}).items())), upload, left_out)


@st.cache_resource(show_spinner=False, max_entries=16)
def dataset(dataset_id: str):
    return store().get_dataset(dataset_id)


def availability(dataset_id: str) -> dict[str, list[str]]:
    """Every metric -> the fields a stored dataset lacks for it (a pass over a conversation dataset's
    rows: once per dataset and set of metrics, not on every rerun of New evaluation)."""
    from evaluators.core.registry import all_metrics

    return _availability(dataset_id, tuple(s.name for s in all_metrics()))


@st.cache_resource(show_spinner=False, max_entries=16)
def _availability(dataset_id: str, metrics: tuple[str, ...]) -> dict[str, list[str]]:
    return dataset(dataset_id).availability()


@st.cache_data(ttl=2, show_spinner=False)
def _saved_metrics(url: str) -> list[dict]:
    return store().saved_metrics()


def saved_metrics() -> list[dict]:
    """The team's saved metrics (latest versions), put in this process's registry for the pickers."""
    from evaluators.core.registry import register
    from evaluators.store.saved_metrics import saved_spec

    out = []
    for d in _saved_metrics(store().url):
        try:
            register(saved_spec(d), replace=True)
        except Exception:  # noqa: BLE001 — a saved metric that no longer loads is left out of the pickers
            continue
        out.append(d)
    return out


def forget_saved_metrics() -> None:
    _saved_metrics.clear()


# ---------------------------------------------------------------- the cost of a run, before it starts
INLINE_ROWS = 2_000  # a judge metric's estimate on at most this many rows is waited for (~0.1 s)


class _Estimates:
    """Estimates of one judge metric on one dataset (:func:`evaluators.api.estimate_run`: every row's
    prompt rendered and looked up in the judge's cache), each computed once, in a background thread."""

    def __init__(self) -> None:
        from collections import OrderedDict
        from concurrent.futures import ThreadPoolExecutor
        from threading import Lock

        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="estimate")
        self.jobs: OrderedDict = OrderedDict()
        self.lock = Lock()

    def job(self, key: tuple, compute):
        with self.lock:
            fut = self.jobs.get(key)
            if fut is None or (fut.done() and fut.exception() is not None):  # a failed one is tried again
                fut = self.jobs[key] = self.pool.submit(compute)
            self.jobs.move_to_end(key)
            while len(self.jobs) > 256:
                self.jobs.popitem(last=False)
            return fut


@st.cache_resource(show_spinner=False)
def _estimates() -> _Estimates:
    return _Estimates()


def _judge_cache_state() -> tuple:
    """What changes the judge's cache: runs starting and ending (each run's id and status, from the list
    cached for 2 s); a run's progress is left out, or a run going on would re-estimate every 2 s."""
    return tuple((r["id"], r["status"]) for r in runs())


def estimate(dataset_id: str, spec, wait: float | None = None) -> dict | None:
    """What a run of ``spec`` on a stored dataset costs in judge calls (``estimate_run``'s figures), summed
    over its judge metrics, each estimated once per dataset, metric, options, judge settings and state of
    the judge's cache: a checkbox or another setting that leaves them alone costs nothing. An estimate
    not ready within ``wait`` seconds (default: at once, for a metric on more than ``INLINE_ROWS`` rows;
    else whatever it takes) gives None: it goes on in the background (see :func:`estimate_ready`)."""
    import json
    from concurrent.futures import wait as wait_for

    from evaluators.api import estimate_run
    from evaluators.run.spec import RunSpec

    ds, state, db = dataset(dataset_id), _judge_cache_state(), store()  # read here: the thread has no script run
    judge = json.dumps(spec.judge.identity(), sort_keys=True, default=str)
    futures = []
    for name in [m for m in spec.metrics if spec.metric(m).is_judge]:
        one = RunSpec([name], {}, spec.judge, {k: v for k, v in spec.templates.items() if k == name},
                      {k: v for k, v in spec.options.items() if k == name},
                      {k: v for k, v in spec.template_texts.items() if k == name},
                      definitions={k: v for k, v in spec.definitions.items() if k == name})
        metric = spec.metric(name)  # the version the picker holds now (a saved metric's newer version: a new key)
        key = (dataset_id, name, metric.signature(), json.dumps(metric.definition, sort_keys=True, default=str),
               json.dumps(one.to_dict(), sort_keys=True, default=str), judge, state)
        futures.append(_estimates().job(key, lambda one=one: estimate_run(db, ds, one)))
    _, pending = wait_for(futures, timeout=wait if wait is not None else None if len(ds) <= INLINE_ROWS else 0)
    if pending:
        return None
    parts = [f.result() for f in futures]
    out = {k: sum(p[k] for p in parts) for k in ("judge_calls", "cached", "classic_values", "skipped_turns",
                                                  "prompt_tokens", "completion_tokens")}
    out["latency_s"] = parts[0]["latency_s"] if parts else None
    out["tokenizer"] = parts[0].get("tokenizer") if parts else None
    out["by_metric"] = {k: v for p in parts for k, v in (p.get("by_metric") or {}).items()}
    return out


def estimate_ready(dataset_id: str, spec) -> bool:
    """Whether :func:`estimate` has its figures now."""
    return estimate(dataset_id, spec, wait=0) is not None


# ---------------------------------------------------------------- risk and safety
def safety_runs(wanted: str | None = None) -> list[dict]:
    """Runs with at least one risk and safety metric, newest first."""
    from evaluators.core.registry import all_metrics

    names = {s.name for s in all_metrics() if s.family == "safety"}
    return [r for r in runs(wanted) if names & set(r["spec"]["metrics"])]


def completed_safety_runs(wanted: str | None = None, at_least: int = 2) -> list[dict]:
    """Completed runs with a risk and safety metric, newest first, read again (as :func:`completed_runs`)
    before a page says there are fewer than ``at_least``: a run that ended within the list's 2 s counts."""
    out = [r for r in safety_runs(wanted) if r["status"] == "completed"]
    if len(out) < at_least:
        _runs.clear()
        out = [r for r in safety_runs(wanted) if r["status"] == "completed"]
    return out


def _version(run: dict) -> tuple:
    return (run["status"], run["tasks_done"], run["tasks_errored"], str(run["finished_at"]))


@st.cache_data(show_spinner=False, max_entries=32, ttl=600)
def _run_cost(run_id: str, version: tuple, spec_json: str) -> dict:
    from evaluators.read.cost import kept_run_cost

    return kept_run_cost(store(), run_id)


def run_cost(run: dict) -> dict:
    """The run's ``cost.*`` figures (evaluators.read.cost: a pass over its results), read again when its spec or
    state changes and, while it runs, at each twentieth of its tasks (not at every progress report)."""
    import json

    step = max(1, (run["tasks_total"] or 0) // 20)
    version = (run["status"], (run["tasks_done"] + run["tasks_errored"]) // step, str(run["finished_at"]))
    return _run_cost(run["id"], version, json.dumps(run["spec"], sort_keys=True, default=str))


@st.cache_data(show_spinner=False, max_entries=1024, ttl=3600)
def _run_rates(run_id: str, version: tuple) -> list[tuple]:
    from evaluators.read.view import kept_rates

    return [tuple(r) for r in kept_rates(store(), run_id)]  # Results' cards' rule, kept beside the store


def run_rates(run: dict) -> list[tuple]:
    """Per metric of a run (metric, measure, rate or None, scored rows, rows, errored rows), as Results' cards
    compute them at the run's own thresholds: once per state of the run."""
    return _run_rates(run["id"], _version(run))


@st.cache_data(ttl=2, show_spinner=False)
def _batches(run_id: str, version: tuple) -> list[dict]:
    return store().run_batches(run_id, with_ids=False)


def batches(run: dict) -> list[dict]:
    """The run's Batch API batches and their states (without their requests' ids): read again every 2 s,
    and at once when the run's progress or state changes."""
    return _batches(run["id"], _version(run))


@st.cache_data(show_spinner=False, max_entries=16, ttl=600)
def _attack_comparison(base_id: str, attack_id: str, id_column: str, versions: tuple):
    from evaluators.suites.safety import compare_attack_rows

    base, attack = _results(base_id, versions[0]), _results(attack_id, versions[1])
    numbers = tuple([res.dataset.row_no(i) for i in range(len(res))] for res in (base, attack))
    return compare_attack_rows(base.rows(), attack.rows(), id_column, names=("baseline run", "attack run"),
                               row_numbers=numbers)


def attack_comparison(base: dict, attack: dict, id_column: str):
    """The direct-attack comparison of two runs, computed once per state of both runs."""
    return _attack_comparison(base["id"], attack["id"], id_column, (_version(base), _version(attack)))
# ---------------------------------------------------------------- WildBench
def wildbench_runs(kind: str | None = None, wanted: str | None = None) -> list[dict]:
    """Runs with a WildBench metric (``kind``: "wb_score" or "pairwise" to keep only those), newest first."""
    from evaluators.core.registry import get_metric

    def has(r: dict) -> bool:
        kinds = {get_metric(m).kind for m in r["spec"]["metrics"] if m.startswith("wildbench_")}
        return bool(kinds) if kind is None else kind in kinds

    return [r for r in runs(wanted) if has(r)]


def _wb_version(r: dict) -> tuple:
    return (r["id"], r["status"], r["tasks_done"], r["tasks_errored"], str(r["finished_at"]))


@st.cache_data(ttl=30, show_spinner="Computing the leaderboard…", max_entries=16)
def _leaderboard(versions: tuple, length_penalty: int | None) -> dict:
    from evaluators.suites.wildbench import leaderboard as build

    picked = [run(v[0]) for v in versions]
    picked = [r for r in picked if r is not None]
    return build([results(r, {}) for r in picked], length_penalty, [r["name"] for r in picked])


def leaderboard(chosen: list[dict], length_penalty: int | None = None) -> dict:
    """Model -> WildBench aggregates over the chosen runs (recomputed when one of them changes)."""
    return _leaderboard(tuple(_wb_version(r) for r in chosen), length_penalty)


# ------------------------------------------------------------ reviews
@st.cache_data(ttl=2, show_spinner=False)
def reviewed_rows(run_id: str) -> dict[int, int]:
    """Row -> how many verdicts people gave it (re-read every 2 s: reviewers work at the same time)."""
    return store().reviewed_rows(run_id)


def _reviews_state(run_id: str) -> tuple:
    """Names the reviews of a run as they are now: how many, and the latest."""
    return store().review_state(run_id)


@st.cache_resource(show_spinner=False, max_entries=32, ttl=600)
def _agreement(run_id: str, state: tuple, thresholds: tuple, reviews: tuple, _res):
    from evaluators.review import agreement

    return agreement(store(), run_id, results=_res)


def agreement(run: dict, res: RunResults) -> dict:
    """Per judged metric, judge-human agreement and the corrected rate (``evaluators.review.agreement``),
    computed once per state of the run, thresholds and reviews."""
    thresholds = tuple(sorted(res.thresholds.items()))
    return _agreement(run["id"], _version(run), thresholds, _reviews_state(run["id"]), res)


def queues(run_id: str) -> list[dict]:
    """A run's review queues, newest first (read each time: a teammate may have made one)."""
    return store().queues(run_id)


@st.cache_resource(show_spinner=False, max_entries=16, ttl=600)
def _comparison(base_id: str, base_state: tuple, other_id: str, other_state: tuple, label: tuple, thresholds: tuple,
                judged: tuple, _base, _other):
    from evaluators.read.paired import judges_agreement, paired_differences

    return paired_differences(_base, _other, *label), judges_agreement(_base, _other, only=list(judged))


def comparison(base_run: dict, other_run: dict, base: RunResults, other: RunResults, label: tuple[str, str],
               judged: list[str]):
    """(paired differences, judge-judge agreement on the metrics ``judged``) of two runs
    (``evaluators.read.paired``), ``label`` naming (the other run, the baseline) in the sentences: their
    bootstraps computed once per state of the two runs and their thresholds, not on every rerun of the
    Compare page."""
    thresholds = (tuple(sorted(base.thresholds.items())), tuple(sorted(other.thresholds.items())))
    return _comparison(base_run["id"], _version(base_run), other_run["id"], _version(other_run), label, thresholds,
                       tuple(judged), base, other)


@st.cache_resource(show_spinner=False, max_entries=16, ttl=600)
def _trend(states: tuple, thresholds: tuple, _runs: list) -> list:
    from evaluators.read.trend import trend, trend_chart

    loaded = [(r, results(r, dict(thresholds))) for r in _runs]
    out = []
    for spec in loaded[0][1].specs:
        points = trend(loaded, spec.name)
        if len(points) >= 2:
            out.append((spec.name, points, trend_chart(points, spec.name)))
    return out


def trend(runs: list[dict], thresholds: dict[str, float]) -> list:
    """Per metric of the first run that two or more of ``runs`` have: (name, the points of
    ``evaluators.read.trend.trend``, its chart), with ``thresholds`` applied to every run (each run's own where
    none is given); built once per state of the runs and thresholds."""
    return _trend(tuple((r["id"], _version(r)) for r in runs), tuple(sorted(thresholds.items())), runs)


@st.cache_resource(show_spinner=False, max_entries=16, ttl=600)
def _repeats(run_id: str, state: tuple, thresholds: tuple, _res) -> dict:
    from evaluators.read.repeats import jury_agreement, repeat_agreement

    out = {}
    for s in _res.specs:
        if s.is_judge:
            out[s.name] = {"repeat": repeat_agreement(_res, s.name), "jury": jury_agreement(_res, s.name)}
    return out


def repeats(run: dict, res: RunResults) -> dict:
    """Per judged metric, ``repeat`` and ``jury``: how often a repeated judge's verdict flips, or a jury's
    judges split, with Fleiss' kappa and more (``evaluators.read.repeats``); None where a metric was judged
    once, by one judge (once per state of the run and thresholds); empty for such a run."""
    spec = run.get("spec") or {}
    if int(spec.get("repeat") or 1) <= 1 and not spec.get("jury"):
        return {}
    return _repeats(run["id"], _version(run), tuple(sorted(res.thresholds.items())), res)


# ---------------------------------------------------------------- agents: each tool's success rate across a run
@st.cache_resource(show_spinner=False, max_entries=16, ttl=600)
def _tool_rates(run_id: str, _ds) -> list[dict]:
    from evaluators.read.agents import tool_rates as rates

    return rates(_ds)


def tool_rates(run_id: str, ds) -> list[dict]:
    """Per tool across a run's rows (a run's dataset never changes: keyed by the run)."""
    return _tool_rates(run_id, ds)


# ---------------------------------------------------------------- monitoring (production traces)
@st.cache_data(ttl=2, show_spinner=False)
def _monitor_projects(url: str) -> list[str]:
    return store().monitor_projects()


def monitor_projects(wanted: str | None = None) -> list[str]:
    """The monitoring projects, by name; re-read at once when the URL names one the cached list lacks."""
    out = _monitor_projects(store().url)
    if wanted and wanted not in out:
        _monitor_projects.clear()
        out = _monitor_projects(store().url)
    return out


def make_ingest_token(project: str, created_by: str | None) -> str:
    """A new ingest token for ``project`` (made if new): only its hash is stored; the token is returned once."""
    _, token = store().create_ingest_token(project, created_by=created_by)
    _monitor_projects.clear()
    return token


@st.cache_data(ttl=5, show_spinner=False)
def _monitor_traffic(url: str, project: str) -> dict:
    from evaluators.read.monitor import traffic

    return traffic(store(), project)


def monitor_traffic(project: str) -> dict:
    """``evaluators.read.monitor.traffic`` (counts made in the database), read again every 5 s."""
    return _monitor_traffic(store().url, project)


@st.cache_data(ttl=5, show_spinner=False, max_entries=64)
def _trace_page(url: str, project: str, filters, before: tuple | None) -> dict:
    from evaluators.read.monitor import trace_page as page

    return page(store(), project, filters, before)


def trace_page(project: str, filters, before: tuple | None = None) -> dict:
    """One page of a project's trace list (``evaluators.read.monitor.trace_page``: a ``TraceFilter``, the key
    the page starts after), read again every 5 s."""
    return _trace_page(store().url, project, filters, before)


@st.cache_data(ttl=5, show_spinner=False, max_entries=32)
def _trace_detail(url: str, project: str, trace_id: str) -> dict | None:
    from evaluators.read.monitor import trace_detail as detail

    return detail(store(), project, trace_id)


@st.cache_data(ttl=5, show_spinner=False, max_entries=16)
def _trace_telemetry(url: str, project: str, trace_id: str) -> tuple:
    from evaluators.read.monitor import trace_telemetry as telemetry

    return telemetry(store(), project, trace_id)


def trace_telemetry(project: str, trace_id: str) -> tuple[list[dict], list[dict], bool]:
    """A trace's raw spans and log records (``evaluators.read.monitor.trace_telemetry``), read again every 5 s."""
    return _trace_telemetry(store().url, project, trace_id)


def trace_detail(project: str, trace_id: str) -> dict | None:
    """One trace opened (``evaluators.read.monitor.trace_detail``), read again every 5 s; None if unknown."""
    return _trace_detail(store().url, project, trace_id)


def save_monitor_rule(project: str, name: str, metrics: list[str], sample_rate: float, judge: dict,
                      key_env: str | None, **limits) -> int:
    """The Monitoring page's form: ``evaluators.monitor.rules.add_rule`` (checked as ``monitor rule add`` checks it),
    the traffic's cached counts dropped so the rule shows at once. Returns its version."""
    from evaluators.monitor.rules import add_rule

    version = add_rule(store(), project, name, metrics, sample_rate, judge, key_env, **limits)
    _monitor_traffic.clear()
    return version
