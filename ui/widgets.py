"""Shared widgets of the dashboard: the error guard, text helpers, run pickers and lists, a run's progress,
the headline cards and threshold sliders, and the tables of the Datasets page. Pages compose these; no
scoring happens here. The Rows tab is in ``ui.rows``, the judge's settings (new run, retry) in
``ui.judge_form``, the share link and exports in ``ui.exports_widgets``."""
from __future__ import annotations

import collections
import contextlib
import json
import logging
import re
import textwrap

import streamlit as st

from evaluators import EvalError
from evaluators.read.charts_overview import number, output_label, rate_of
from evaluators.core.names import about, display_name, name_of  # noqa: F401  (name_of: for pages and ui modules)
from evaluators.core.registry import MetricSpec
from evaluators.read.results import RunResults, status_text
from evaluators.run.planning import eta_seconds
from evaluators.store.schema import utcnow
from evaluators.run.workers import spawn_worker, worker_stopped
from ui import loaders, state

ACTIVE = ("queued", "running")
log = logging.getLogger("evaldash")


def entry() -> None:
    """The first call of every page, before it draws anything: a run that did not come through app.py's router
    (sign-in and all) goes through it now, at the same address.

    A freshly started server serves its first request from the pages/ folder by file name, before app.py has
    routed once (Streamlit's older multipage mode, until ui/__init__.py turns it off): without this, that first
    visitor saw the page's own output above its guard, signed in or not.
    """
    if not st.session_state.get("routed"):
        st.rerun()


@contextlib.contextmanager
def guard():
    """Show a user's error as a message and anything else as a short apology: never a traceback.

    Also sends a run that did not come through app.py's router through it (as :func:`entry`, for a page that
    draws nothing before its guard)."""
    entry()
    try:
        yield
    except EvalError as e:
        st.error(literal(e))  # a message may quote a file name, a URL or a value from the data
    except Exception as e:  # noqa: BLE001 — the browser gets one line; the server log gets the rest
        log.exception("page error")
        st.error("Something went wrong: " + literal(f"{type(e).__name__}: {e}"))


_MD_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character
# where GitHub's autolinks would start a link (read after escapes): a scheme's "://", mailto: and xmpp:, an
# e-mail address's "@", "www."
_AUTOLINK = re.compile(r"(?<=\\:)(?=\\/\\/)|(?i:(?<=mailto\\:)|(?<=xmpp\\:))|(?<=\\@)(?=\w)|(?i:(?<=www)(?=\\\.))")
JOINER = "\u2060"  # WORD JOINER: zero-width, unbreakable, and not part of a URL


def plain(text: object) -> str:
    """Text for a place that renders Markdown (a label, a caption, a tooltip, an ``st.table`` cell), shown as
    written: every ASCII punctuation character backslash-escaped, as CommonMark allows for each, so nothing in it
    starts Markdown, HTML or one of Streamlit's directives (no image or link such as ``![x](http://...)``,
    ``[x](javascript:...)``, ``<http://...>``; no tag or entity, emphasis, heading, list, formula, colour or
    icon). A bare URL or e-mail address is made a link after the escapes are read (GitHub's autolinks work on
    the text), so an invisible word joiner breaks each ``://``, ``mailto:``, ``@`` and ``www.``.
    Where the text should look like code, :func:`literal`; where nothing renders Markdown (``st.text``,
    ``st.code``, a dataframe's cells, a selectbox's options), the text itself."""
    return _AUTOLINK.sub(JOINER, _MD_PUNCTUATION.sub(r"\\\1", str(text)))


def plain_table(df):
    """A DataFrame for ``st.table`` (which renders Markdown in cells, headers and index): every text through
    :func:`plain`; numbers as they are."""
    def esc(v):
        return plain(v) if isinstance(v, str) else v

    out = df.map(esc)
    out.columns = out.columns.map(lambda c: tuple(map(esc, c)) if isinstance(c, tuple) else esc(c))
    out.index = out.index.map(lambda c: tuple(map(esc, c)) if isinstance(c, tuple) else esc(c))
    return out


def literal(text: object) -> str:
    """Data for a place that renders Markdown (a label, st.error, a caption): an inline code span,
    so it shows as written — no link (not even a bare URL), image, HTML, directive or formula."""
    flat = " ".join(str(text).split())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    return f"{fence} {flat} {fence}"


def count(n: int, word: str, plural: str | None = None) -> str:
    """A count with its noun in the right number: "1 run", "2 runs", "1,024 rows" (never "1 runs" or "run(s)")."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


# Headings of the tables people read, for keys that are not self-explaining once the underscores go
HEADINGS = {"WB_score": "WB-Score", "WB_reward": "WB-Reward", "ci95_low": "95% CI low", "ci95_high": "95% CI high",
            "task_macro": "Task macro", "length": "Length (characters)", "K": "K (characters)", "#": "#",
            "measure": "Measure", "defect_rate": "Defect rate"}


def heading(key: str) -> str:
    """A table's column key as a person reads it: "defect_rate" -> "Defect rate", "model_A" -> "Model A",
    "violence.attack_score" -> "violence: attack score". Metric names stay as written (they are the names the
    user picked on New evaluation and sees on every card)."""
    from evaluators.core.registry import all_metrics

    if key in HEADINGS:
        return HEADINGS[key]
    head, dot, rest = key.partition(".")
    names = {s.name for s in all_metrics()}
    if head in names:
        return f"{head}: {rest.replace('_', ' ')}" if dot else key
    if key.split(" ")[0] in names:  # "violence severity": a metric and a plain word
        return key
    words = key.replace(".", " ").replace("_", " ")
    return words[:1].upper() + words[1:]


def _cell(v, fmt: str | None) -> str:
    if v is None or v != v:  # None or NaN
        return "–"
    if fmt == "percent":
        return f"{v:.1%}"
    if fmt:
        return fmt % v
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)  # a severity 4 read back as 4.0


def table(frame, formats: dict[str, str] | None = None, key: str | None = None,
          widths: dict[str, str] | None = None, **kwargs):
    """``st.dataframe`` for a table people read: human headings (:func:`heading`), numbers in ``formats``
    (printf style, or "percent"), column ``widths`` ("small", "medium", "large"), and a missing value as "–"
    rather than Streamlit's grey "None" (a column with one is shown as text). Returns the element's event
    (for ``on_select``)."""
    import pandas as pd

    frame = pd.DataFrame(frame).copy()
    formats, widths = formats or {}, widths or {}
    config = {}
    for col in frame.columns:
        label, fmt, width = heading(str(col)), formats.get(col), widths.get(col)
        if frame[col].isna().any():
            frame[col] = [_cell(v, fmt) for v in frame[col]]
            numeric = fmt is not None or all(v == "–" for v in frame[col])
            config[col] = st.column_config.TextColumn(label, width=width, alignment="right" if numeric else None)
        elif fmt is not None:
            config[col] = st.column_config.NumberColumn(label, width=width, format=fmt)
        else:
            config[col] = st.column_config.Column(label, width=width)
    if frame.index.name is not None:
        frame.index.name = heading(str(frame.index.name))
    return st.dataframe(frame, column_config=config, key=key, **{"hide_index": True, **kwargs})


def url_picked_table(frame, values: list, param: str, parse=str, key: str | None = None,
                     widths: dict[str, str] | None = None):
    """:func:`table` whose one selected row follows the URL's ``param`` (a link selects it; a click writes it):
    ``values`` are the rows' values for it, in order. Returns the selected value (None: none), which may be one
    the table lacks when a link names it (the caller says so)."""
    chosen = state.read(param, None, parse)
    event = table(frame, key=key, widths=widths, on_select="rerun", selection_mode="single-row",
                  selection_default={"selection": {"rows": [values.index(chosen)]}} if chosen in values else None)
    k = state.selected(event, len(values))
    if k is not None and values[k] != chosen:
        chosen = values[k]
        state.write(param, chosen)
    return chosen


KEPT = "kept.judge."  # session state holding New evaluation's judge settings for the browser session (ui.judge_form)


def session_key() -> str | None:
    """The judge key typed on New evaluation in this browser session (in its memory only: never stored,
    never in the URL), also once another page is shown (Resume, Retry failed rows)."""
    return st.session_state.get(KEPT + "api_key") or None


def status_word(run: dict) -> str:
    """A run's state in one word, as every view shows it: "stopped" for an active-looking run whose
    worker is gone, "completed with errors" for a completed run with errored cells, else the stored status."""
    return "stopped" if worker_stopped(run) else status_text(run)


def run_label(runs: list[dict]):
    """Option text for a run picker. Active runs' states are read from the store now (not from the
    cached list), so the picker and the progress bar below say the same thing; the labels are fixed
    for this script run (a widget's options must not change under it)."""
    fresh = {r["id"]: (loaders.run(r["id"]) or r) if r["status"] in ACTIVE else r for r in runs}
    text = distinct({rid: f"{r['name']} · {status_word(r)} · {r['created_at']:%Y-%m-%d %H:%M}"
                     for rid, r in fresh.items()})

    def label(rid: str) -> str:
        return text.get(rid, rid)  # option text: not Markdown
    return label


def distinct(text: dict[str, str]) -> dict[str, str]:
    """Option texts (id -> text) that tell every option apart. Streamlit hands a selectbox's choice back as
    its option text: two runs of one name started in the same minute, or two datasets of one name and size
    (one file saved with two mappings), would read back as the first of them, so such texts carry the id."""
    seen = collections.Counter(text.values())
    return {k: f"{t} · {k}" if seen[t] > 1 else t for k, t in text.items()}


def dataset_label(saved: list[dict]):
    """Option text for a dataset picker: name, rows and shape (and the id when another dataset reads the same)."""
    text = distinct({d["id"]: f"{d['name']} · {count(d['rows'], 'row')} · {d['shape']}" for d in saved})

    def label(did: str) -> str:
        return text.get(did, did)  # option text: not Markdown
    return label


def run_picker(runs: list[dict]) -> str:
    """The run a page is of, pinned in the URL as ``run`` (the newest when none is given), shown as a
    button naming it that opens the list of runs to pick another.

    The list is a selectbox inside a popover, built in the browser only when opened: drawn on the
    page, its code costs every first render ~0.2 s of the browser's main thread (bench/dashboard_scale.py).
    """
    ids = [r["id"] for r in runs]
    chosen = state.current("run", ids, ids[0], "run")
    label = run_label(runs)
    key = f"run_picker.{chosen}"  # a new run in the URL (a link) is a new widget, set from the URL

    def picked() -> None:
        state.write("run", st.session_state[key])

    with st.popover(f"Run: {plain(label(chosen))}"):  # a name as text, as every other page shows it (not code)
        st.selectbox("Run", ids, index=ids.index(chosen), format_func=label, key=key, on_change=picked)
    return chosen


STATUS_ICONS = {"completed": ":material/check_circle:", "completed with errors": ":material/warning:", "running": ":material/pending:", "queued": ":material/schedule:",
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
        from ui import judge_form  # (it imports this module)

        if judge_form.rerun_panel(run):  # another judge: its own button, not a resume with the same one
            return
    elif run["status"] == "cancelled":
        st.info("The run was cancelled. Results so far are kept.")
    elif status_text(run) == "completed with errors":
        st.warning(f"Completed with errors: {count(run['tasks_errored'], 'judged task')} of {run['tasks_total']:,} "
                   "ended in an error and are left out of every rate below: the Errors tab says why, and runs them "
                   "again (with other judge settings if need be).", icon=":material/warning:")
    elif run["status"] == "stopped":  # at its budget: resumed with a higher one (ui.cost)
        from ui import cost

        cost.stopped_panel(run)
        return
    if run["status"] != "completed" and st.button("Resume run", key="resume"):
        spawn_worker(loaders.store(), run["id"], session_key())  # refuses while a worker holds the run
        loaders.forget_lists()
        st.rerun()


def judged_metrics(run: dict) -> list[str]:
    """The run's metrics that call the judge (none when the run has no judge)."""
    from evaluators.run.spec import run_metric

    spec = run["spec"] or {}
    return [m for m in spec.get("metrics", []) if run_metric(spec, m).is_judge] if spec.get("judge") else []


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
        head += " · no judged result yet" + (f" ({count(attempts, 'judge call')} made)" if attempts else "")
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
    from evaluators.run.spec import run_metric

    specs = [run_metric(run["spec"], name) for name in run["spec"]["metrics"]]
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


def what_if_banner(run: dict, thresholds: dict[str, float]) -> None:
    """While a threshold differs from the run's own (a what-if slider, or a shared link that set one), say so
    above every tab, since every number on every tab follows it; with a Reset to the run's thresholds."""
    from evaluators.run.spec import run_metric

    own = {n: float(run["spec"]["thresholds"].get(n, run_metric(run["spec"], n).default_threshold))
           for n in thresholds}
    moved = [f"{n} {thresholds[n]:g} (the run's: {own[n]:g})" for n in thresholds if thresholds[n] != own[n]]
    if not moved:
        return
    c1, c2 = st.columns([5, 1], vertical_alignment="center")
    c1.warning("What-if thresholds in force: " + "; ".join(moved) + ". Every rate, verdict and count on every "
               "tab below uses them, not the thresholds the run was made with.", icon=":material/tune:")
    c2.button("Reset thresholds", key="th.reset", on_click=_reset_thresholds, args=(list(thresholds),))


def _reset_thresholds(names: list[str]) -> None:
    for n in names:
        state.write(f"th.{n}", None)
        st.session_state.pop(f"th.{n}", None)


def _threshold_to_url(name: str, default: float) -> None:
    value = st.session_state[f"th.{name}"]
    state.write(f"th.{name}", f"{value:g}" if value != default else None)


MIN_N = 10  # fewer scored rows than this and a card's rate is marked "too few to say"


def headline(res: RunResults, distrusted: set[str] = frozenset()) -> None:
    """Rows, errored rows and each metric's pass (or defect) rate, as cards that wrap onto more rows. Under
    each rate: its rule (threshold), how many rows it rests on of how many, the errored ones, its interval;
    for a metric in ``distrusted`` (its judge disagrees with the reviewers more than chance), that first."""
    cards = [("Rows", f"{len(res):,}", None), ("Errored rows", f"{res.errored_rows():,}", None)]
    for s in res.specs:
        r = rate_of(s, res.summary(s))
        pending = r.counts["pending_rows"]
        more = f" · {r.counts['scored_rows']} scored so far, {pending} pending" if pending else ""
        rule = (f"share of scored rows with {output_label(s)} {'≥' if s.higher_is_better else '≤'} "
                f"{res.thresholds[s.name]:g}" if uses_threshold(s) else "share of scored rows labelled true")
        if r.measure == "defect rate" and uses_threshold(s):
            rule = rule.replace("≤", ">").replace("≥", "<")
        short = " ".join(rule.split(" ")[-2:]) if uses_threshold(s) else "labelled true"  # "≥ 3", "> 3"
        card = rate_card(f"{display_name(s)} {r.measure}", r.rate, r.low, r.high, r.counts["scored_rows"], len(res),
                         r.counts["errored_rows"], f"{about(s)} {r.measure.capitalize()}: {rule}{more}.", short,
                         digits=0)
        if s.name in distrusted:
            card = (*card[:3], "do not trust: the judge disagrees with your reviewers · " + card[3], "red")
        cards.append(card)
    metric_cards(cards)


def rate_card(label: str, rate: float | None, low: float | None, high: float | None, scored: int, rows: int,
              errored: int, help_: str, rule: str = "", digits: int = 1) -> tuple:
    """A rate's card: the rate, and under it what decides its meaning (the rule, "2 of 8 scored, 6 errored",
    the 95% interval), marked "too few to say" below :data:`MIN_N` scored rows. One rule for every page's cards."""
    n = rate_counts(scored, rows, errored)
    lead = f"{rule} · " if rule else ""
    if rate is None:
        return label, "–", help_, f"{lead}no scored rows · {n}", "gray"
    few = too_few(scored)
    under = ("too few to say · " if few else "") + lead + n + f" · 95% CI {low:.{digits}%}–{high:.{digits}%}"
    return label, f"{rate:.{digits}%}", help_, under, "orange" if few else "gray"


def rate_counts(scored: int, rows: int, errored: int) -> str:
    """What a rate rests on, as every card and the Runs table say it: "2 of 8 scored, 6 errored"."""
    return f"{scored:,} of {rows:,} scored" + (f", {errored:,} errored" if errored else "")


def too_few(scored: int) -> bool:
    """A rate on fewer than :data:`MIN_N` scored rows is marked "too few to say"."""
    return scored < MIN_N


def metric_cards(cards: list[tuple]) -> None:
    """(label, value, help[, under, colour]) cards in a wrapping row, each as wide as its own text: nothing is
    cut to "coh…" or "hate_unfairn…", however many metrics or however narrow the window (fixed columns squeeze
    every card to 1/n of the row). ``under`` is a line under the value (no arrow), in ``colour``."""
    with st.container(horizontal=True, gap="small"):
        for label, value, help_, *under in cards:
            delta, colour = (under + [None, "gray"])[:2]
            st.metric(label, value, delta, colour, border=True, help=help_, width="content", delta_arrow="off")


def panel_title(res: RunResults, spec: MetricSpec) -> tuple[str, list[str]]:
    """A small multiple's title: the metric's readable name (evaluators.core.names), then what it measures in one
    line, its average with its interval, its rate with its interval, and its counts."""
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
    what = textwrap.wrap(spec.description or output_label(spec), 44)  # within the panel's width, not over the next
    return display_name(spec), [*what, *line, counts] if line else [*what, "no scored rows yet", counts]


def problems_table(problems: list, truncated: bool = False) -> None:
    n = len(problems)
    st.error(f"{n:,}{'+' if truncated else ''} {'problem' if n == 1 and not truncated else 'problems'} found; "
             "nothing was saved.")
    # a long problem wraps in its cell: Streamlit's grid wraps text only in rows taller than 4rem (64 px)
    longest = max((len(p.message) for p in problems), default=0)
    table([{"file": p.source, "row": p.row or "", "field": p.field, "problem": p.message} for p in problems],
          widths={"problem": "large"}, **({"row_height": max(72, 22 * min(4, -(-longest // 70)) + 10)}
                                          if longest > 70 else {}))


def json_preview(rows: list[dict]) -> None:
    """Records as a table of text (JSON for lists and objects): a column mixing numbers and text still renders."""
    import pandas as pd

    st.dataframe(pd.DataFrame([{k: "" if v is None else json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list))
                                else str(v) for k, v in r.items()} for r in rows]), hide_index=True)


def yes_or_cancel(prefix: str, verb: str, asked: str) -> bool:
    """A question's two buttons ("Yes, VERB" and Cancel, keyed ``PREFIX.yes`` / ``PREFIX.no``): either takes the
    question (session key ``asked``) away; True when the answer is yes, Cancel draws the page again."""
    c1, c2 = st.columns(2)
    if c1.button(f"Yes, {verb}", key=f"{prefix}.yes", type="primary"):
        st.session_state.pop(asked, None)
        return True
    if c2.button("Cancel", key=f"{prefix}.no"):
        st.session_state.pop(asked, None)
        st.rerun()
    return False
