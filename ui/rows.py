"""The Results page's Rows tab: filters, one page of rows (scores and verdicts first) and the selected
row's detail (also the Compare page's). What a model or a dataset wrote is shown as text."""
from __future__ import annotations

import hashlib
import json

import streamlit as st

from evaluators.read.charts_overview import number
from evaluators.core.registry import MetricSpec
from evaluators.read.results import RunResults
from ui import loaders, review as review_ui, state, trace as trace_ui
from ui.widgets import literal, name_of, plain


def row_filters(res: RunResults) -> dict:
    names = [s.name for s in res.specs]
    c1, c2, c3, c4 = st.columns([2, 2, 3, 2])
    metric = state.choose("Metric", "metric", names, name_of, where=c1)
    verdict = c2.selectbox("Verdict", ["all", "pass", "fail", "error"], key="verdict", bind=state.URL)
    search = c3.text_input("Search query and response", key="q", bind=state.URL)
    sort = state.choose("Sort by", "sort", ["row"] + names, name_of, where=c4)
    spec = next(s for s in res.specs if s.name == metric)
    low, high = map(float, spec.score_range)
    rng = st.slider(f"{name_of(metric)} range", low, high, (low, high), 1.0 if spec.integer else 0.05,
                    key=f"range.{metric}", bind=state.URL)
    desc = st.toggle("Descending", key="desc", bind=state.URL)
    return dict(metric=metric, verdict=verdict, search=search, sort=sort, descending=desc,
                low=None if rng[0] == low else rng[0], high=None if rng[1] == high else rng[1])


PAGE_ROWS = 100
CELL_CHARS = 300  # text shown in a table cell
PASS_STYLE, FAIL_STYLE = "background-color: #e8f5e9; color: #1b5e20", "background-color: #ffebee; color: #b71c1c"


def _styled(df, specs: list[MetricSpec]):
    """Scores first, each cell coloured by the row's verdict (pass green, fail red) and reading as the
    score with sensible digits and the verdict in words ("4 · pass", "0.4213 · fail", "error"); text after.
    The verdicts stay in the data as their own columns (for the Styler, downloads, tests), not shown."""
    import pandas as pd

    names = [x for s in specs for x in (s.name, f"{s.name} verdict")]
    df = df[["#", *names, *(["reviewed"] if "reviewed" in df else []), "query", "response"]].copy()
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

    for s in specs:  # a cell without a score reads as its state ("error"); the browser shows any empty cell as
        # "None", whatever the Styler says, so these hold -inf (first in an ascending sort, as a worst value)
        df[s.name] = df[s.name].fillna(float("-inf"))
    styler = df.style.apply(colour, axis=None)
    for s in specs:
        verdicts = df[f"{s.name} verdict"]
        value = (lambda v: "true" if v else "false") if s.kind == "label" else number
        for word in verdicts.unique():
            shown_as = (lambda v, w=word, f=value: f"{f(v)} · {w}") if word in ("pass", "fail") else (lambda v, w=word: w)
            styler = styler.format(shown_as, subset=pd.IndexSlice[verdicts.index[verdicts == word], [s.name]])
    return styler


def _columns(specs: list[MetricSpec], reviewed: bool = False) -> tuple[list[str], dict]:
    """The columns shown (a score column per metric, its verdict in words inside it, how many people
    reviewed the row when any has been) and their widths: each metric's as narrow as its name allows,
    so that the text (query, response) has the rest."""
    widths = {s.name: min(170, max(100, 8 * len(s.name) + 30)) for s in specs}
    config = {"#": st.column_config.NumberColumn("#", help="row number in the file", width=44),
              **{name: st.column_config.Column(width=w) for name, w in widths.items()},
              "reviewed": st.column_config.TextColumn("reviewed", width=80, help="verdicts people gave the row"),
              "query": st.column_config.TextColumn(width="medium"), "response": st.column_config.TextColumn(width="large")}
    return ["#", *widths, *(["reviewed"] if reviewed else []), "query", "response"], config


def row_table(res: RunResults, filters: dict, key: str = "rows") -> tuple[int | None, bool]:
    """One page of the filtered, sorted rows; returns the selected row's index and whether this page
    lists it.

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
    # the pager at the left: the grid's toolbar (search, download, full screen) shows over its top right corner
    mid, right, left = st.columns([1, 1, 4], vertical_alignment="center")
    left.caption(f"rows {first + 1 if total else 0}–{first + len(df)} of {total:,} matching · {len(res):,} in the run"
                 + (f" · page {page} of {pages}" if pages > 1 else ""))
    mid.button("‹ Previous", key=f"{key}.prev", disabled=page <= 1, on_click=state.write, args=("page", page - 1))
    right.button("Next ›", key=f"{key}.next", disabled=page >= pages, on_click=state.write, args=("page", page + 1))
    ids = [int(i) for i in df.index]
    marks = loaders.reviewed_rows(rid) if (rid := review_ui.run_id_of(res)) else {}
    if marks and len(df):
        df = df.assign(reviewed=[f"✓ {marks[i]}" if i in marks else "" for i in ids])
    chosen = state.read_row()
    # a new widget whenever the rows shown change, so that a stale position never names another row
    view_key = f"{key}.{hashlib.sha1(repr(ids).encode()).hexdigest()[:12]}"
    default = {"selection": {"rows": [ids.index(chosen)]}} if chosen in ids else None
    order, config = _columns(res.specs, bool(marks))
    event = st.dataframe(_styled(df, res.specs) if len(df) else df, hide_index=True, on_select="rerun",
                         selection_mode="single-row", key=view_key, selection_default=default,
                         column_order=order, column_config=config)
    k = state.selected(event, len(df))
    if k is not None and ids[k] != chosen:
        chosen = ids[k]
        state.write_row(chosen)
    return chosen, chosen in ids


def position(res: RunResults, filters: dict, row: int) -> int | None:
    """Where ``row`` is among the rows matching ``filters`` in their order (None: the filters leave it out)."""
    import numpy as np

    hit = np.nonzero(np.asarray(matching(res, filters)) == row)[0]
    return int(hit[0]) if len(hit) else None


def matching(res: RunResults, filters: dict):
    """The rows matching ``filters``, in the table's order (0-based indices)."""
    return res.select(**filters) if hasattr(res, "select") else res.table(**filters).index.to_numpy()


def not_listed(res: RunResults, filters: dict, row: int) -> None:
    """Why the selected row's detail shows while the table does not list it: the filters or the search
    leave it out, or it is on another page of the matching rows (with a button to that page)."""
    at = position(res, filters, row)
    name = f"Row {res.dataset.row_no(row)}"
    if at is None:
        st.info(f"{name} is filtered out: it does not match the filters or the search above, so the table does "
                "not list it. Its detail stays below; change the filters to see it among the rows.",
                icon=":material/filter_alt_off:")
        return
    page = at // PAGE_ROWS + 1
    c1, c2 = st.columns([4, 1], vertical_alignment="center")
    c1.caption(f"{name} matches the filters; it is on page {page} of the table.")
    c2.button(f"Go to page {page}", key="rows.goto", on_click=state.write, args=("page", page))


@st.fragment
def rows_view(res: RunResults) -> None:
    """The Rows tab: filters, one page of rows across the page's width and, under it, the selected row's
    detail (its inputs beside its scores), framed, the page scrolled to it. A fragment, so that a filter, a page or a selection reruns this
    tab only, not the charts of the whole run."""
    filters = row_filters(res)
    # what "Only the filtered rows" exports (ui.exports_widgets), for this run (loaders.results names it in .state)
    st.session_state["results.filters"] = ((getattr(res, "state", None) or (None,))[0], filters)
    row, listed = row_table(res, filters)
    review_ui.queue_of_filter(res, filters)
    if row is not None and not 0 <= row < len(res):
        st.error(f"Row not found: the link names a row this run does not have (it has {len(res):,} rows).")
        return
    if row is None:
        st.caption("Select a row (the box at its left) to read its inputs, scores and the judge's reasoning here.")
        return
    if not listed:
        not_listed(res, filters, row)
    with st.container(border=True, key="row_detail"):  # framed: the row the table selects
        detail(res, row, side_by_side=True)
    scroll_to("row_detail", f"{(getattr(res, 'state', None) or (None,))[0]}:{row}")


# Our own script (nothing of the data in it): brings a framed element (a container's key) into the window once
# per ``token``, after its render (a share link's detail renders after the table); scroll-margin keeps it clear
# of Streamlit's fixed header. Once per token and page: a filter or another tab leaves the reader where they are.
SCROLL = """<script>(() => {{
  const key = {key}, token = {token}, done = (window.__evaldashScrolled ||= {{}});
  if (done[key] === token) return;
  const deadline = Date.now() + 15000;
  const go = () => {{
    const el = document.querySelector(".st-key-" + key);
    if (el) {{ done[key] = token; el.style.scrollMarginTop = "4.5rem"; el.scrollIntoView({{block: "start"}}); }}
    else if (Date.now() < deadline) requestAnimationFrame(go);
  }};
  requestAnimationFrame(go);
}})();</script>"""


def scroll_to(key: str, token: str) -> None:
    """Scroll the page to the container keyed ``key`` when ``token`` (which row it shows) is new: a selected
    row's detail sits under its table, which alone filled a 1,000 px window."""
    st.html(SCROLL.format(key=json.dumps(key), token=json.dumps(token)), unsafe_allow_javascript=True)


def text_block(label: str, text: object) -> None:
    """A labelled piece of data, shown as text (never Markdown or HTML)."""
    if text:
        st.markdown(f"**{label}**")  # our label
        st.text(text if isinstance(text, str) else json.dumps(text, ensure_ascii=False))


ROLES = ("user", "assistant", "system", "tool")


_md = plain  # (the name the Markdown escape had here: ui.widgets.plain)


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


def conversation(res: RunResults, i: int, scores: bool = True) -> None:
    """The conversation as chat bubbles; each assistant turn carries its scores and verdicts (not when
    ``scores`` is False: a blind review)."""
    scores = turn_scores(res, i) if scores else {}
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


def detail(res: RunResults, i: int, side_by_side: bool = False) -> None:
    """Everything about one row: inputs, then per metric its value and verdict, the judge's reasoning,
    and the raw reply collapsed (``side_by_side``: the scores beside the inputs, not under them). A metric
    computed in process has no reasoning: its value only."""
    ds = res.dataset
    st.subheader(f"Row {ds.row_no(i)}")
    review_ui.review_row_link(res, i)
    inputs, scores = st.columns(2, gap="large") if side_by_side else (st.container(), st.container())
    with inputs:
        row_inputs(res, i)
    if not side_by_side:
        st.markdown("---")
    with scores:
        metric_details(res, i)


def row_inputs(res: RunResults, i: int, scores: bool = True) -> None:
    """A row's inputs: query, context, response and ground truth, or the conversation's turns with their
    documents (and their scores unless ``scores`` is False)."""
    ds = res.dataset
    if trace_ui.agent_trace(res, i, judged=scores):  # an agent's row: its steps and tool calls
        return
    if ds.shape == "conversation":
        conversation(res, i, scores)
        return
    c = ds.canonical(i)
    for label, key in (("Query", "query"), ("Context", "context"), ("Response", "response"),
                       ("Ground truth", "ground_truth")):
        text_block(label, c.get(key))


def metric_details(res: RunResults, i: int, only: list[str] | None = None, people: bool = True) -> None:
    """Per metric (``only`` these): its value and verdict, the reviewers' verdicts beside it (``people``),
    an error or a note, the judge's reasoning and the raw reply."""
    ds = res.dataset
    verdicts = review_ui.row_verdicts(res, i) if people else {}
    for s in res.specs:
        if only is not None and s.name not in only:
            continue
        cell = res.cell(s.name, i)
        verdict = res.passed(s, cell)
        mark = "" if verdict is None else (" :green[**pass**]" if verdict else " :red[**fail**]")
        value = "pending" if cell is None else (shown(cell.outputs.get(s.primary)) if cell.status == "ok" and
                                                 cell.value is not None else cell.status)
        st.markdown(f"**{_md(s.name)}: {value}**{mark}")  # named as the table heads its column  # ours: a metric name, a number, a word
        if verdicts.get(s.name):
            review_ui.people_line(s, res.thresholds[s.name], verdicts[s.name])
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
