"""Shared widgets of the dashboard. Pages compose these; no scoring happens here."""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re

import streamlit as st

from evaluators import EvalError
from evaluators.charts_overview import number, output_label, rate_of
from evaluators.exports import csv_text, jsonl_text
from evaluators.judge import JudgeConfig, judge_url, named_judges
from evaluators.registry import MetricSpec
from evaluators.report import html_report
from evaluators.results import RunResults
from evaluators.runner import eta_seconds
from evaluators.store import utcnow
from evaluators.workers import retry_failed, spawn_worker, worker_stopped
from ui import auth, loaders, state

ACTIVE = ("queued", "running")
log = logging.getLogger("evaldash")


@contextlib.contextmanager
def guard():
    """Show a user's error as a message and anything else as a short apology: never a traceback.

    Also sends a session that reached a page without app.py's router through it once.
    """
    if not st.session_state.get("routed"):
        st.rerun()
    try:
        yield
    except EvalError as e:
        st.error(literal(e))  # a message may quote a file name, a URL or a value from the data
    except Exception as e:  # noqa: BLE001 — the browser gets one line; the server log gets the rest
        log.exception("page error")
        st.error("Something went wrong: " + literal(f"{type(e).__name__}: {e}"))


def literal(text: object) -> str:
    """Data for a place that renders Markdown (a label, st.error, a caption): an inline code span,
    so it shows as written — no link (not even a bare URL), image, HTML, directive or formula."""
    flat = " ".join(str(text).split())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    return f"{fence} {flat} {fence}"


def session_key() -> str | None:
    """The judge key typed in this browser session (never stored, never in the URL)."""
    return st.session_state.get("judge_api_key") or None


def status_word(run: dict) -> str:
    """A run's state in one word, as every view shows it: "stopped" for an active-looking run whose
    worker is gone, else the stored status."""
    return "stopped" if worker_stopped(run) else run["status"]


def run_label(runs: list[dict]):
    """Option text for a run picker. Active runs' states are read from the store now (not from the
    cached list), so the picker and the progress bar below say the same thing; the labels are fixed
    for this script run (a widget's options must not change under it)."""
    fresh = {r["id"]: (loaders.run(r["id"]) or r) if r["status"] in ACTIVE else r for r in runs}
    text = {rid: f"{r['name']} · {status_word(r)} · {r['created_at']:%Y-%m-%d %H:%M}" for rid, r in fresh.items()}
    # Streamlit hands a selectbox's choice back as its option text: two runs of one name started in the same
    # minute would read back as the first of them, so such labels carry the run's id
    seen = collections.Counter(text.values())
    text = {rid: f"{t} · {rid}" if seen[t] > 1 else t for rid, t in text.items()}

    def label(rid: str) -> str:
        return text.get(rid, rid)  # option text: not Markdown
    return label


def run_picker(runs: list[dict]) -> str:
    """The run a page is of, pinned in the URL as ``run`` (the newest when none is given), shown as a
    button naming it that opens the list of runs to pick another.

    The list is a selectbox inside a popover, built in the browser only when opened: drawn on the
    page, its code costs every first render ~0.2 s of the browser's main thread (bench/dashboard_scale.py).
    """
    ids = [r["id"] for r in runs]
    chosen = state.current("run", ids, ids[0])
    label = run_label(runs)
    key = f"run_picker.{chosen}"  # a new run in the URL (a link) is a new widget, set from the URL

    def picked() -> None:
        state.write("run", st.session_state[key])

    with st.popover(f"Run: {literal(label(chosen))}"):
        st.selectbox("Run", ids, index=ids.index(chosen), format_func=label, key=key, on_change=picked)
    return chosen


STATUS_ICONS = {"completed": ":material/check_circle:", "running": ":material/pending:", "queued": ":material/schedule:",
                "failed": ":material/error:", "cancelled": ":material/cancel:", "stopped": ":material/pause_circle:"}


def run_lines(runs: list[dict], dataset_names: dict[str, str], query: str = "") -> list[tuple[dict, str]]:
    """Each run with one line of plain text about it (dataset, state, progress, metrics, judge, when,
    by whom), the runs whose name or line holds ``query`` (any case) only."""
    out = []
    for r in runs:
        done = (r["tasks_done"] + r["tasks_errored"]) / r["tasks_total"] if r["tasks_total"] else 0.0
        state_ = status_word(r) + ("" if r["status"] == "completed" else f" {done:.0%}")
        parts = [dataset_names.get(r["dataset_id"], r["dataset_id"]), state_,
                 f"{r['tasks_errored']:,} errored" if r["tasks_errored"] else "",
                 ", ".join(r["spec"]["metrics"]), (r["spec"].get("judge") or {}).get("model", ""),
                 f"{r['created_at']:%Y-%m-%d %H:%M}", f"by {r['created_by']}" if r.get("created_by") else ""]
        out.append((r, " · ".join(p for p in parts if p)))
    q = query.strip().lower()
    return [(r, line) for r, line in out if q in r["name"].lower() or q in line.lower()] if q else out


def pager(page_path: str, page: int, pages: int, params: dict) -> None:
    """Links to the previous and next page of a list (``page`` in the URL), and where this one is."""
    with st.container(horizontal=True, gap="medium", vertical_alignment="center"):
        if page > 1:
            st.page_link(page_path, label="Newer", icon=":material/chevron_left:",
                         query_params={**params, "page": str(page - 1)})
        st.caption(f"Page {page} of {pages}")
        if page < pages:
            st.page_link(page_path, label="Older", icon=":material/chevron_right:",
                         query_params={**params, "page": str(page + 1)})


def run_status(run: dict) -> None:
    """Live progress while a run is active (outside the script run: read from the store), or its end state."""
    stopped = worker_stopped(run)
    if run["status"] in ACTIVE and not stopped:
        _live(run["id"], run["status"])
        return
    if stopped:
        st.warning("This run's worker stopped (killed, or silent for 30 s). Results so far are kept: resume to finish.")
    elif run["status"] == "failed":
        st.error("The run failed:")
        st.code(run["error"] or "", language=None, wrap_lines=True)  # may quote a judge's reply
    elif run["status"] == "cancelled":
        st.info("The run was cancelled. Results so far are kept.")
    if run["status"] != "completed" and st.button("Resume run", key="resume"):
        spawn_worker(loaders.store(), run["id"], session_key())  # refuses while a worker holds the run
        loaders.forget_lists()
        st.rerun()


def judged_metrics(run: dict) -> list[str]:
    """The run's metrics that call the judge (none when the run has no judge)."""
    from evaluators.registry import get_metric

    spec = run["spec"] or {}
    return [m for m in spec.get("metrics", []) if get_metric(m).is_judge] if spec.get("judge") else []


def progress_text(run: dict, counts: dict[str, int] | None, first_error: str | None) -> tuple[str, str | None]:
    """The progress line of an active run and, while the judge has answered nothing, why.

    The time left is extrapolated only from work that has really been done: with a judge, from
    the judged results stored so far, never from classic metrics that finish in a moment while
    the judge has not answered once. Until a judged result is stored there is no estimate, only
    "no judged result yet", the judge calls made (failed attempts included) and the first error.

    Args:
        run: the stored run.
        counts: status -> stored results of the judged metrics (None: the run uses no judge).
        first_error: the first error of a judged metric, if any.
    Returns:
        (the bar's text, a line to show under it or None).
    """
    total, done, errored = run["tasks_total"], run["tasks_done"], run["tasks_errored"]
    finished = done + errored
    head = f"{run['status']}: {finished}/{total or '?'} scored · {errored} errored"
    elapsed = (utcnow() - run["started_at"]).total_seconds() if run["started_at"] else None
    note = None
    if counts is not None and not counts.get("ok"):
        attempts = run.get("judge_calls") or 0
        head += " · no judged result yet" + (f" ({attempts} judge call(s) made)" if attempts else "")
        note = f"First error: {first_error}" if first_error else None
        left = None
    elif counts is not None:
        judged_done = sum(counts.values())
        left = (total - finished) * elapsed / judged_done if elapsed and judged_done and finished < total else None
    else:
        left = eta_seconds(finished, total, elapsed) if elapsed is not None else None
    if left is not None:
        head += f" · about {left:.0f} s left"
    limited = run.get("rate_limited_until")  # the judge asked the run to wait (429, rate-limit headers)
    wait = (limited - utcnow()).total_seconds() if limited else 0.0
    if wait > 0:
        head += f" · rate limited, waiting {max(1, round(wait))} s"
    return head, note


@st.fragment(run_every=1.0)
def _live(run_id: str, shown: str) -> None:
    """The progress bar, redrawn every second from the store. When the run's state changes from the
    one the page was drawn with (queued -> running, or it ended), the whole page is redrawn, so the
    picker, the bar and the results below never disagree."""
    run = loaders.run(run_id)
    if run is None or run["status"] != shown or worker_stopped(run):
        st.rerun()  # the whole page, with the new state
    judged = judged_metrics(run)
    store = loaders.store()
    counts = store.status_counts(run_id, judged) if judged else None
    first = store.first_error(run_id, judged) if judged and counts and counts.get("error") else None
    text, note = progress_text(run, counts, first)
    total = run["tasks_total"]
    st.progress((run["tasks_done"] + run["tasks_errored"]) / total if total else 0.0, text=text)
    if note:
        st.caption(literal(note))  # the judge's or the server's words: shown as written
    if st.button("Cancel run", key="cancel"):
        loaders.store().request_cancel(run_id)


def grid(items: list, per_row: int):
    """Columns in rows of at most ``per_row``, one per item (so labels never get squeezed to "coh…")."""
    for k in range(0, len(items), per_row):
        chunk = items[k:k + per_row]
        yield from zip(st.columns(per_row), chunk)


def uses_threshold(spec: MetricSpec) -> bool:
    """Whether moving the threshold can change a verdict: not for labels, whose verdict is the label
    itself (``kinds.label.LabelKind.passed`` ignores the threshold)."""
    return spec.kind != "label"


def threshold_bar(run: dict, cells: dict | None = None, shown: bool = True) -> dict[str, float]:
    """The thresholds in force: the run's own, or what a slider set (``th.<metric>`` in the URL, only
    when changed). ``shown``: one slider per metric whose threshold matters, three a row, ``cells`` (if
    given) receiving each metric's grid cell for what goes under its slider; not shown (their tab is
    closed), no sliders: the page draws six widgets fewer and the URL keeps what they set. (Not bound
    with Streamlit's ``bind``: a bound parameter leaves the URL with its widget.)"""
    from evaluators.registry import get_metric

    specs = [get_metric(name) for name in run["spec"]["metrics"]]
    own = {s.name: float(run["spec"]["thresholds"].get(s.name, s.default_threshold)) for s in specs}
    out = dict(own)
    movable = [s for s in specs if uses_threshold(s)]
    bounds = {s.name: tuple(map(float, s.score_range)) for s in movable}
    for spec in movable:
        low, high = bounds[spec.name]
        out[spec.name] = min(max(state.read(f"th.{spec.name}", own[spec.name], float), low), high)
    if not shown:
        return out
    for col, spec in grid(movable, 3):
        if cells is not None:
            cells[spec.name] = col
        low, high = bounds[spec.name]
        out[spec.name] = col.slider(f"{spec.name} threshold", low, high, out[spec.name],
                                    1.0 if spec.integer else 0.05, key=f"th.{spec.name}",
                                    on_change=_threshold_to_url, args=(spec.name, own[spec.name]),
                                    help="Pass rates are recomputed from stored scores; nothing is re-run.")
    return out


def _threshold_to_url(name: str, default: float) -> None:
    value = st.session_state[f"th.{name}"]
    state.write(f"th.{name}", f"{value:g}" if value != default else None)


def headline(res: RunResults) -> None:
    """Rows, errored rows and each metric's pass (or defect) rate, as cards that wrap onto more rows."""
    cards = [("Rows", f"{len(res):,}", None), ("Errored rows", f"{res.errored_rows():,}", None)]
    for s in res.specs:
        r = rate_of(s, res.summary(s))
        pending = r.counts["pending_rows"]
        more = f" · {r.counts['scored_rows']} scored so far, {pending} pending" if pending else ""
        rule = (f"share of scored rows with {output_label(s)} {'≥' if s.higher_is_better else '≤'} "
                f"{res.thresholds[s.name]:g}" if uses_threshold(s) else "share of scored rows labelled true")
        if r.measure == "defect rate" and uses_threshold(s):
            rule = rule.replace("≤", ">").replace("≥", "<")
        cards.append((f"{s.name} {r.measure}", "–" if r.rate is None else f"{r.rate:.0%}", rule + more))
    # A wrapping row of cards each as wide as its own text: nothing is cut to "coh…" or "7…", however
    # many metrics or however narrow the window (fixed columns squeeze every card to 1/n of the row).
    with st.container(horizontal=True, gap="small"):
        for label, value, help_ in cards:
            st.metric(label, value, border=True, help=help_, width="content")


def panel_title(res: RunResults, spec: MetricSpec) -> tuple[str, list[str]]:
    """A small multiple's title: the metric, then its average with its interval, its rate with its
    interval, and its counts."""
    sm = res.summary(spec)
    r = rate_of(spec, sm)
    mean, (lo, hi) = sm.get(spec.primary), sm.get(f"{spec.primary}_ci95") or (None, None)
    line = []
    if mean is not None and uses_threshold(spec):  # a label's mean is its defect rate, said next
        line.append(f"average {number(mean)}" + ("" if lo is None else f" (95% CI {number(lo)}–{number(hi)})"))
    if r.rate is not None:
        line.append(f"{r.measure} {r.rate:.1%} ({r.low:.1%}–{r.high:.1%})")
    counts = (f"{sm['scored_rows']} scored · {sm['errored_rows']} errored · {sm['skipped_rows']} skipped"
              + (f" · {sm['pending_rows']} pending" if sm["pending_rows"] else ""))
    return output_label(spec), [*line, counts] if line else ["no scored rows yet", counts]


ERRORS_SHOWN = 1000  # errored cells listed at once (the data layer reads no more than this, plus one)


def errors_panel(res: RunResults, run: dict) -> None:
    """Errored rows (1-based, as the dataset numbers them), and a retry that may use another judge."""
    errors = res.errors(ERRORS_SHOWN + 1)
    if not errors:
        st.success("No errored rows.")
        return
    more = len(errors) > ERRORS_SHOWN
    errors = errors[:ERRORS_SHOWN]
    st.caption(f"More than {ERRORS_SHOWN} errored cells; the first {ERRORS_SHOWN}:" if more
               else f"{len(errors)} errored cell(s) (row, metric):")
    st.dataframe([{"row": res.dataset.row_no(i), "metric": m, "error": e} for i, m, e in errors], hide_index=True)
    if run["status"] in ACTIVE and not worker_stopped(run):
        return
    spec_judge = (run["spec"] or {}).get("judge")
    judge, key = None, session_key()
    if spec_judge and judged_metrics(run):
        current = JudgeConfig.from_dict(spec_judge)
        change = st.toggle("Retry with other judge settings", key="retry.change",
                           help="The run records the judge it used before; each result keeps the model that scored it.")
        if change:
            judge, typed = judge_settings("retry", current)
            if judge is None:
                return
            # a key typed for the run's judge goes to no other address (or server judge): only one typed here
            same_place = (judge.provider, judge.judge_name, judge_url(judge)) == \
                (current.provider, current.judge_name, judge_url(current))
            key = typed if typed or not same_place else key
    label = "Retry failed rows" + (" with these judge settings" if judge is not None else "")
    if st.button(label, key="retry"):
        retry_failed(loaders.store(), run["id"], key, judge)  # the worker clears the errors once it holds the run
        loaders.forget_lists()
        st.rerun()


def row_filters(res: RunResults) -> dict:
    names = [s.name for s in res.specs]
    c1, c2, c3, c4 = st.columns([2, 2, 3, 2])
    metric = c1.selectbox("Metric", names, key="metric", bind=state.URL)
    verdict = c2.selectbox("Verdict", ["all", "pass", "fail", "error"], key="verdict", bind=state.URL)
    search = c3.text_input("Search query and response", key="q", bind=state.URL)
    sort = c4.selectbox("Sort by", ["row"] + names, key="sort", bind=state.URL)
    spec = next(s for s in res.specs if s.name == metric)
    low, high = map(float, spec.score_range)
    rng = st.slider(f"{metric} range", low, high, (low, high), 1.0 if spec.integer else 0.05,
                    key=f"range.{metric}", bind=state.URL)
    desc = st.toggle("Descending", key="desc", bind=state.URL)
    return dict(metric=metric, verdict=verdict, search=search, sort=sort, descending=desc,
                low=None if rng[0] == low else rng[0], high=None if rng[1] == high else rng[1])


PAGE_ROWS = 100
CELL_CHARS = 300  # text shown in a table cell
PASS_STYLE, FAIL_STYLE = "background-color: #e8f5e9; color: #1b5e20", "background-color: #ffebee; color: #b71c1c"


def _styled(df, specs: list[MetricSpec]):
    """Scores and verdicts first, each coloured by the row's verdict (pass green, fail red); text after."""
    names = [x for s in specs for x in (s.name, f"{s.name} verdict")]
    df = df[["#", *names, "query", "response"]].copy()
    for col in ("query", "response"):  # a cell shows one line; the detail pane shows the whole text
        df[col] = df[col].map(lambda t: t if not isinstance(t, str) or len(t) <= CELL_CHARS else t[:CELL_CHARS] + "…")

    def colour(frame):
        out = frame.copy().astype(object)
        out[:] = ""
        for s in specs:
            v = frame[f"{s.name} verdict"]
            style = v.map({"pass": PASS_STYLE, "fail": FAIL_STYLE}).fillna("")
            out[s.name], out[f"{s.name} verdict"] = style, style
        return out

    return df.style.apply(colour, axis=None)


def row_table(res: RunResults, filters: dict, key: str = "rows") -> int | None:
    """One page of the filtered, sorted rows; returns the selected row's index.

    The selection is kept by the row's id (``row`` in the URL), not by its position: a change of
    filter, sort, search, page or thresholds shows a new table, which starts with that row selected
    if it is on the page, and a click selects the row under it.
    """
    sig = repr(sorted(filters.items()))
    page = max(1, state.read("page", 1, int))
    if st.session_state.get(f"{key}.sig", sig) != sig:
        page = 1  # other filters: back to the first page
    st.session_state[f"{key}.sig"] = sig
    total, df = res.query(**filters, offset=(page - 1) * PAGE_ROWS, limit=PAGE_ROWS)
    pages = max(1, -(-total // PAGE_ROWS))
    if page > pages:
        page = pages
        total, df = res.query(**filters, offset=(page - 1) * PAGE_ROWS, limit=PAGE_ROWS)
    state.write("page", page if page > 1 else None)
    first = (page - 1) * PAGE_ROWS
    left, mid, right = st.columns([4, 1, 1])
    left.caption(f"rows {first + 1 if total else 0}–{first + len(df)} of {total:,} matching · {len(res):,} in the run"
                 + (f" · page {page} of {pages}" if pages > 1 else ""))
    mid.button("‹ Previous", key=f"{key}.prev", disabled=page <= 1, on_click=state.write, args=("page", page - 1))
    right.button("Next ›", key=f"{key}.next", disabled=page >= pages, on_click=state.write, args=("page", page + 1))
    ids = [int(i) for i in df.index]
    chosen = state.read("row", None, int)
    # a new widget whenever the rows shown change, so that a stale position never names another row
    view_key = f"{key}.{hashlib.sha1(repr(ids).encode()).hexdigest()[:12]}"
    default = {"selection": {"rows": [ids.index(chosen)]}} if chosen in ids else None
    event = st.dataframe(_styled(df, res.specs) if len(df) else df, hide_index=True, on_select="rerun",
                         selection_mode="single-row", key=view_key, selection_default=default,
                         column_config={"#": st.column_config.NumberColumn("#", help="row number in the file"),
                                        "query": st.column_config.TextColumn(width="medium"),
                                        "response": st.column_config.TextColumn(width="large")})
    k = state.selected(event, len(df))
    if k is not None and ids[k] != chosen:
        chosen = ids[k]
        state.write("row", chosen)
    return chosen


@st.fragment
def rows_view(res: RunResults) -> None:
    """The Rows tab: filters, one page of rows and the selected row's detail. A fragment, so that a
    filter, a page or a selection reruns this tab only, not the charts of the whole run."""
    filters = row_filters(res)
    table, pane = st.columns([3, 2])
    with table:
        row = row_table(res, filters)
    with pane:
        if row is not None and 0 <= row < len(res):
            detail(res, row)
        else:
            st.caption("Select a row to read its inputs, scores and the judge's reasoning.")


def text_block(label: str, text: object) -> None:
    """A labelled piece of data, shown as text (never Markdown or HTML)."""
    if text:
        st.markdown(f"**{label}**")  # our label
        st.text(text if isinstance(text, str) else json.dumps(text, ensure_ascii=False))


ROLES = ("user", "assistant", "system", "tool")


def _md(name: str) -> str:
    """One of our names (metric names hold underscores) inside Markdown, without turning into italics."""
    return re.sub(r"([_*\\`\[\]])", r"\\\1", name)


def shown(value) -> str:
    """A row's value as read: a label as true/false, a number with sensible digits."""
    return str(value).lower() if isinstance(value, bool) else number(value)


def _verdict_word(passed: bool | None, status: str) -> str:
    return ("pass" if passed else "fail") if passed is not None else status


def turn_scores(res: RunResults, i: int) -> dict[int, list[str]]:
    """Turn index -> one line per metric with a result for that turn ("coherence 4 · pass"), the
    decisive (worst) turn of a metric marked."""
    out: dict[int, list[str]] = {}
    for s in res.specs:
        cell = res.cell(s.name, i)
        if cell is None:
            continue
        for t in cell.turns:
            ok = t.status == "ok"
            value = (t.outputs or {}).get(s.primary, t.value) if ok else None
            passed = s.kind_impl.turn_passed(s, value, res.thresholds[s.name]) if ok else None
            text = f"{s.name} {shown(value) if ok else ''} · {_verdict_word(passed, t.status)}".replace("  ", " ")
            if cell.decisive_turn == t.turn and len(cell.turns) > 1:
                text += " · ◀ worst turn, decides the row"
            out.setdefault(t.turn, []).append(text)
    return out


def conversation(res: RunResults, i: int) -> None:
    """The conversation as chat bubbles; each assistant turn carries its scores and verdicts."""
    scores = turn_scores(res, i)
    turn = 0
    for m in res.dataset.messages(i):
        role = m.get("role") if isinstance(m, dict) else None
        with st.chat_message(role if role in ROLES else "user"):  # a chat name is a label: only ours
            if role not in ROLES:
                st.caption(literal(f"role: {role}"))
            content = m.get("content", "") if isinstance(m, dict) else m
            st.text(content if isinstance(content, str) else json.dumps(content, ensure_ascii=False))
            ctx = m.get("context") if isinstance(m, dict) else None
            if ctx:
                with st.expander("Retrieved documents"):
                    st.json(ctx, expanded=False)
            if role == "assistant":  # turns are the assistant replies, in order (data.conversation_turns)
                for line in scores.get(turn, []):
                    worst = "worst turn" in line
                    st.caption(f":red[**{_md(line)}**]" if worst else _md(line))  # ours: names, numbers, words
                turn += 1


def detail(res: RunResults, i: int) -> None:
    """Everything about one row: inputs, then per metric its value and verdict, the judge's reasoning,
    and the raw reply collapsed. A metric computed in process has no reasoning: its value only."""
    ds = res.dataset
    st.subheader(f"Row {ds.row_no(i)}")
    if ds.shape == "conversation":
        conversation(res, i)
    else:
        c = ds.canonical(i)
        for label, key in (("Query", "query"), ("Context", "context"), ("Response", "response"), ("Ground truth", "ground_truth")):
            text_block(label, c.get(key))
    st.markdown("---")
    for s in res.specs:
        cell = res.cell(s.name, i)
        verdict = res.passed(s, cell)
        mark = "" if verdict is None else (" :green[**pass**]" if verdict else " :red[**fail**]")
        value = "pending" if cell is None else (shown(cell.outputs.get(s.primary)) if cell.status == "ok" and
                                                 cell.value is not None else cell.status)
        st.markdown(f"**{_md(output_label(s))}: {value}**{mark}")  # ours: a metric name, a number, a word
        if cell is None:
            continue
        if cell.error:
            st.error(literal(cell.error))  # may quote the judge's reply
        if cell.note:
            st.warning(cell.note)  # ours: which field the tokenizer could not compare, and the option
        if not s.is_judge:
            continue  # a classic metric's value is all there is (its stored reason is just "ok")
        if cell.reason:
            st.markdown("Judge's reasoning:")
            st.text(cell.reason)  # what a model wrote: text, never Markdown
        with st.expander(f"{s.name}: raw judge reply and call details", expanded=False):
            for t in cell.turns:
                meta = t.meta or {}
                head = f"turn {t.turn + 1}: " if ds.shape == "conversation" else ""
                info = [f"{head}{t.status}", literal(meta["model"]) if meta.get("model") else None,
                        f"{t.latency_ms:.0f} ms" if t.latency_ms else None,
                        f"{(t.prompt_tokens or 0) + (t.completion_tokens or 0)} tokens" if t.prompt_tokens else None,
                        "cached" if t.cached else None]
                st.caption(" · ".join(x for x in info if x))
                if t.raw:
                    st.text(t.raw)  # as sent back, verbatim (no highlighter: its script alone costs a selection ~0.4 s)


def exports(res: RunResults, run: dict) -> None:
    name = "".join(ch if ch.isalnum() else "_" for ch in run["name"])[:60] or run["id"]
    c1, c2, c3 = st.columns(3)
    c1.download_button("Rows as CSV", lambda: csv_text(res.rows()), f"{name}.csv", "text/csv", key="dl.csv")
    c2.download_button("Rows as JSONL", lambda: jsonl_text(res.rows()), f"{name}.jsonl", "application/jsonl", key="dl.jsonl")
    c3.download_button("HTML report", lambda: html_report(res, run), f"{name}.html", "text/html", key="dl.html")


def share_link() -> None:
    """This view's link (URL-encoded; run, tab, filters, thresholds, page and row), with a copy button."""
    st.code(state.link(), language=None, wrap_lines=True)


PROVIDERS = {"OpenAI-compatible base URL": "compatible", "OpenAI": "openai", "Azure OpenAI": "azure"}
NAMED = "Server judge: "  # prefix of an operator's named judge in the provider list
_SECRET = re.compile(r"\b(sk-|key-)[\w*\-.]{4,}")  # a (masked) key a provider may echo in an error


def _provider_choice(options: list[str], current: JudgeConfig | None) -> int:
    if current is None:
        return 0
    if current.judge_name and NAMED + current.judge_name in options:
        return options.index(NAMED + current.judge_name)
    for label, provider in PROVIDERS.items():
        if provider == current.provider and not current.judge_name and label in options:
            return options.index(label)
    return 0


def judge_settings(prefix: str = "judge", current: JudgeConfig | None = None) -> tuple[JudgeConfig | None, str | None]:
    """Judge provider, model and sampling, with a "Test connection" button.

    The operator's named judges come first, picked by name: their URL and key stay on the server
    (nothing to type, nothing shown). The free-form options take a URL and a key typed here, kept
    in this browser session only. Nothing is pre-filled but ``current``: no made-up model or URL.

    Args:
        prefix: widget keys' prefix ("judge" on New evaluation; another for a retry's settings).
        current: settings to start from (a run's judge, for a retry).
    Returns:
        (the config, or None while the model or address is missing; the key typed here, if any).
    """
    named = named_judges()
    options = [NAMED + n for n in named] + list(PROVIDERS)
    choice = st.selectbox("Judge", options, index=_provider_choice(options, current), key=f"{prefix}.provider")
    c3, c4, c5 = st.columns(3)
    temperature = c3.number_input("Temperature", 0.0, 2.0, current.temperature if current else 0.0, 0.1,
                                  key=f"{prefix}.temperature")
    max_tokens = c4.number_input("Max tokens", 16, 8192, current.max_tokens if current else 800, 16,
                                 key=f"{prefix}.max_tokens")
    concurrency = c5.number_input("Concurrency", 1, 128, current.concurrency if current else 8,
                                  key=f"{prefix}.concurrency")
    sampling = dict(temperature=float(temperature), max_tokens=int(max_tokens), concurrency=int(concurrency))
    key_field = "judge_api_key" if prefix == "judge" else f"{prefix}.api_key"
    if choice.startswith(NAMED):
        nj = named[choice[len(NAMED):]]
        st.caption(f"Configured on the server: model {literal(nj.model)}; its address and key are not shown.")
        cfg = JudgeConfig(model=nj.model, provider=nj.provider, base_url=nj.base_url, azure_endpoint=nj.azure_endpoint,
                          api_version=nj.api_version, judge_name=nj.name, **sampling)
        test_connection(prefix, cfg, None)
        return cfg, None
    provider = PROVIDERS[choice]
    same = current is not None and not current.judge_name and current.provider == provider
    model = st.text_input("Model (Azure: deployment)", current.model if same else "", key=f"{prefix}.model",
                          placeholder="the model's name, e.g. gpt-4o-mini or llama3.1").strip()
    base_url = endpoint = None
    if provider == "compatible":
        base_url = st.text_input("Base URL", (current.base_url or "") if same else "", key=f"{prefix}.base_url",
                                 placeholder="e.g. http://localhost:11434/v1 (Ollama), http://host:8000/v1 (vLLM)").strip()
    elif provider == "azure":
        endpoint = st.text_input("Azure endpoint", (current.azure_endpoint if same and current.azure_endpoint else
                                                    os.environ.get("AZURE_OPENAI_ENDPOINT", "")),
                                 key=f"{prefix}.endpoint").strip()
    if provider == "compatible":
        hint = "sent only to this base URL; kept in this browser session only"
    else:
        env = "AZURE_OPENAI_API_KEY" if provider == "azure" else "OPENAI_API_KEY"
        hint = (f"leave empty to use the server's {env}" if os.environ.get(env)
                else "kept in this browser session only")
    st.text_input("API key", type="password", key=key_field, help=hint, placeholder=hint)
    typed = st.session_state.get(key_field) or None
    missing = [what for what, value in (("the model", model), ("the base URL", base_url if provider == "compatible" else 1),
                                        ("the Azure endpoint", endpoint if provider == "azure" else 1)) if not value]
    if missing:
        st.info(f"Give {' and '.join(missing)} of the judge.")
        return None, typed
    cfg = JudgeConfig(model=model, provider=provider, base_url=base_url or None, azure_endpoint=endpoint or None, **sampling)
    test_connection(prefix, cfg, typed)
    return cfg, typed


def test_connection(prefix: str, cfg: JudgeConfig, api_key: str | None) -> None:
    """One call to the judge on request: its answer, or the exact error (a key is never shown)."""
    from evaluators.judge import check_judge

    if not st.button("Test connection", key=f"{prefix}.test", icon=":material/network_check:"):
        return
    quick = dataclasses.replace(cfg, max_retries=1, timeout=min(cfg.timeout, 15.0))
    where = "the server's judge" if cfg.judge_name else judge_url(cfg)
    try:
        with st.spinner("Asking the judge…"):
            calls = check_judge(quick, api_key)
    except EvalError as e:
        msg = str(e)
        if api_key:
            msg = msg.replace(api_key, "***")
        if cfg.judge_name:  # a named judge's address stays on the server
            msg = msg.replace(judge_url(cfg.resolved()), "(the server's judge)")
        st.error("The judge did not answer: " + literal(_SECRET.sub(r"\1***", msg)))
        return
    st.success(f"The judge answered: {literal(where)} · model {literal(cfg.model)} · {calls} call(s).")


def estimate_panel(est: dict, judge: JudgeConfig | None) -> None:
    """Judge calls, tokens, cost and time before a run starts; classic-only runs cost nothing, so no cost."""
    if judge is None:
        st.caption("Classic metrics only: computed on this server, no judge calls and no cost.")
        return
    concurrency = judge.concurrency
    c1, c2 = st.columns(2)
    price_in = c1.number_input("Price per 1M input tokens", 0.0, value=0.15, step=0.05, key="price.in")
    price_out = c2.number_input("Price per 1M output tokens", 0.0, value=0.60, step=0.05, key="price.out")
    per_call = est["latency_s"] or st.session_state.get("price.latency", 2.0)
    cost = est["prompt_tokens"] / 1e6 * price_in + est["completion_tokens"] / 1e6 * price_out
    seconds = est["judge_calls"] * per_call / max(1, concurrency)
    cols = st.columns(4)
    cols[0].metric("Judge calls", est["judge_calls"], help=f"{est['cached']} more answered from the cache")
    cols[1].metric("Tokens (est.)", f"{est['prompt_tokens'] + est['completion_tokens']:,}",
                   help=f"{est['prompt_tokens']:,} in (prompt length / 4) + {est['completion_tokens']:,} out")
    cols[2].metric("Cost (est.)", f"{cost:.4f}")
    cols[3].metric("Time (est.)", f"{seconds:.0f} s", help=f"{per_call:.2f} s a call"
                   + (" (median of this model's past calls)" if est["latency_s"] else " (assumed)"))


def problems_table(problems: list, truncated: bool = False) -> None:
    st.error(f"{len(problems)}{'+' if truncated else ''} problem(s) found; nothing was saved.")
    st.dataframe([{"file": p.source, "row": p.row or "", "field": p.field, "problem": p.message} for p in problems],
                 hide_index=True)


def json_preview(rows: list[dict]) -> None:
    """Records as a table of text (JSON for lists and objects): a column mixing numbers and text still renders."""
    import pandas as pd

    st.dataframe(pd.DataFrame([{k: "" if v is None else json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list))
                                else str(v) for k, v in r.items()} for r in rows]), hide_index=True)
