"""The Review page's parts: who reviews, which queue, one row at a time with the keyboard, and agreement.

Keys (Streamlit's button shortcuts): the digits give the active metric's verdict on its scale (0-7 for a
severity, 1-5 for a score, 1-5 for A++ ... B++, 1/0 for a yes/no label), A agrees with the judge, S skips
the row, the arrows Left and Right move between rows and Up and Down between the row's metrics. Every
verdict is written to the store the moment it is given.
"""
from __future__ import annotations

import math

import streamlit as st

from evaluators.read.results import RunResults
from evaluators.review import make_queue
from evaluators.review.queues import STRATEGIES, progress, rows_for
from evaluators.core.scales import choice_name, human_pass, reviewable, scale, snap
from evaluators.store.reviews import NOTE_MAX_CHARS, REVIEWER_MAX_CHARS, BadVerdict, reviewer_problem
from ui import auth, downloads, loaders, rows, state
from ui.review import review_link
from ui.widgets import guard, literal, name_of, plain, plain_table

REVIEWER = "review.reviewer"  # session state: the name given once per browser session (sign-in off)


def reviewer() -> str | None:
    """The signed-in user, else a name asked once per browser session."""
    user = auth.current_user()
    if user:
        return user
    if st.session_state.get(REVIEWER):
        c1, c2 = st.columns([5, 1], vertical_alignment="center")
        c1.caption("Reviewing as " + literal(st.session_state[REVIEWER]))
        c2.button("Change", key="review.rename", on_click=st.session_state.pop, args=(REVIEWER, None))
        return st.session_state[REVIEWER]
    with st.form("review.name"):
        name = st.text_input("Your name", max_chars=REVIEWER_MAX_CHARS, help="Stored with each verdict you give, so "
                             "that agreement between reviewers can be measured. Asked once per browser session.")
        if st.form_submit_button("Start reviewing", type="primary") and name.strip():
            why = reviewer_problem(name.strip())  # the store's own check, said now rather than at the first verdict
            if why:
                st.error(literal(f"Your name: {why}"))
                return None
            st.session_state[REVIEWER] = name.strip()
            st.rerun()
    return None


def reviewer_if_known() -> str | None:
    """Who is reviewing, if known (signed in, or named in this session), without asking."""
    return auth.current_user() or st.session_state.get(REVIEWER)


def _queue_label(q: dict) -> str:
    who = [n for n in q["assignments"] if n]
    return (f"{q['name']} · {STRATEGIES[q['strategy']]} · {len(q['rows'])} rows · "
            + (", ".join(who) if who else "anyone"))


def pick_queue(run_id: str, queues: list[dict], who: str) -> dict | None:
    """The queue the URL names (``queue``), else the newest; None when the run has none. A link to a row
    (``row``, no ``queue``) opens a queue holding that row for this reviewer, else the row alone."""
    row = state.read_row()
    if row is not None and "queue" not in st.query_params:
        queues = [q for q in queues if row in rows_for(q, who)]
        if not queues:
            st.caption("This row is in no review queue: you review it on its own (your verdicts count towards "
                       "agreement, not towards a sample's corrected rate).")
            return None
    if not queues:
        if st.query_params.get("queue") is not None:
            state.not_found("review queue", "queue", st.query_params["queue"])
        return None
    ids = [q["id"] for q in queues]
    by_id = {q["id"]: q for q in queues}
    labels = {q["id"]: _queue_label(q) for q in queues}
    return by_id[state.pick("Review queue", "queue", ids, ids[0], format_func=lambda i: labels[i])]


def _make_queue(run: dict, res: RunResults, who: str) -> None:
    """The form's button: make the queue from the form's fields, then show the Review tab at its first row."""
    f = {k[len("review.q."):]: v for k, v in st.session_state.items() if k.startswith("review.q.")}
    if not f.get("metrics"):
        st.session_state["review.q_error"] = "Choose at least one metric to review."
        return
    try:
        qid = make_queue(loaders.store(), run["id"], res, f["name"].strip() or "review", f["strategy"], f["metrics"],
                         int(f["size"]), seed=int(f["seed"]), reviewers=[p for p in f["people"].split(",") if p.strip()],
                         overlap=f["overlap"], blind=f["blind"], on=f["on"], created_by=who)
    except ValueError as e:
        st.session_state["review.q_error"] = str(e)
        return
    st.session_state.pop("review.q_error", None)
    state.write("queue", qid)
    state.write_row(None)
    st.session_state["view"] = "Review"  # the page's tabs (bound to the URL as "view"): on to reviewing


def new_queue_form(run: dict, res: RunResults, who: str) -> None:
    """Make a queue: which rows (strategy, how many, seed), for which metrics, given to whom."""
    judged = [s.name for s in res.specs if reviewable(s)]
    if st.session_state.get("review.q_error"):
        st.error(literal(st.session_state["review.q_error"]))
    with st.form("review.new_queue"):
        c1, c2 = st.columns(2)
        c1.text_input("Queue name", value=f"review {len(loaders.queues(run['id'])) + 1}", max_chars=300,
                      key="review.q.name")
        c2.selectbox("Rows", list(STRATEGIES), format_func=lambda k: STRATEGIES[k], key="review.q.strategy",
                     help="Only random and stratified samples correct the run's rates: rows chosen on purpose say "
                          "how the judge errs there, not how often.")
        st.multiselect("Metrics to review", judged, default=judged, key="review.q.metrics", format_func=name_of)
        c1, c2, c3 = st.columns(3)
        c1.number_input("How many rows", 1, max(1, len(res)), min(40, max(1, len(res))), key="review.q.size")
        c2.number_input("Seed", 0, 2**31 - 1, 0, help="The same seed draws the same rows.", key="review.q.seed")
        c3.selectbox("Order or stratify by", judged, key="review.q.on", format_func=name_of)
        st.text_input("Reviewers (names, comma-separated; empty: anyone)", key="review.q.people")
        c1, c2 = st.columns(2)
        c1.checkbox("Every reviewer reviews every row", key="review.q.overlap", help="For agreement between "
                    "reviewers (Krippendorff's alpha); otherwise the rows are dealt out in turn.")
        c2.checkbox("Blind: hide the judge's verdict until the reviewer answers", value=True, key="review.q.blind")
        st.form_submit_button("Make the queue", type="primary", on_click=_make_queue, args=(run, res, who))


def _key(queue: dict | None, who: str) -> str:
    return f"review.{queue['id'] if queue else 'row'}.{who}"


def _answered(run_id: str, share: list[int], who: str) -> dict[tuple[int, str], dict]:
    return {(r["row_idx"], r["metric"]): r for r in loaders.store().reviews(run_id, rows=share, reviewer=who)
            if r["value"] is not None}


def _go(k: str, share: list[int], pos: int) -> None:
    pos = max(0, min(len(share) - 1, pos))
    st.session_state[k + ".pos"] = pos
    st.session_state.pop(k + ".metric", None)
    st.session_state.pop(k + ".refused", None)
    state.write_row(share[pos])


def _answer(run_id: str, queue: dict | None, who: str, i: int, metric: str, value: float, agreed: bool,
            judge: float | None, k: str, share: list[int], metrics: list[str], pos: int) -> None:
    """Store the verdict now; then the row's next unanswered metric, or the next row not yet done."""
    store = loaders.store()
    note = st.session_state.get(f"{k}.note.{i}") or None
    at = store.judged_times(run_id, metric, [i]).get(i)
    try:
        store.save_review(run_id, i, metric, who, value, agreed=agreed, note=note, judge_value=judge, judged_at=at,
                          queue_id=queue["id"] if queue and i in queue["rows"] else None)
    except BadVerdict as e:  # (a callback's exception would reach the browser as a traceback)
        st.session_state[k + ".refused"] = f"Not saved: {e}"
        return
    st.session_state.pop(k + ".refused", None)
    done = _answered(run_id, share, who)
    left = [m for m in metrics if (i, m) not in done]
    if left:
        st.session_state[k + ".metric"] = left[0]
        return
    st.session_state[k + ".last"] = (i, metric)
    nxt = _next_open(share, metrics, done, pos)
    if nxt is None or nxt < pos:  # the end: nothing stays "answering", so no further key changes a verdict;
        st.session_state.pop(k + ".metric", None)  # rows skipped earlier are offered by name (_review_rows)
        return
    _go(k, share, nxt)


def _next_open(share: list[int], metrics: list[str], done: dict, pos: int) -> int | None:
    """The position of the next row with a metric not yet answered after ``pos``, else the first such row
    before it (a row skipped earlier), else None."""
    open_ = [p for p in range(len(share)) if p != pos and any((share[p], m) not in done for m in metrics)]
    return next((p for p in open_ if p > pos), open_[0] if open_ else None)


def _refuse(k: str, why: str) -> None:
    st.session_state[k + ".refused"] = why


@st.fragment
def review_rows(run: dict, res: RunResults, queue: dict | None, who: str) -> None:
    """One row at a time: its inputs, and per metric the reviewer's verdict (keys), the judge's (hidden
    in a blind queue until answered), a note; a fragment, so a key press reruns this part only."""
    with guard():  # inside the fragment: its own reruns never reach the page's guard
        _review_rows(run, res, queue, who)


def _review_rows(run: dict, res: RunResults, queue: dict | None, who: str) -> None:
    run_id = run["id"]
    metrics = queue["metrics"] if queue else [s.name for s in res.specs if reviewable(s)]
    share = rows_for(queue, who) if queue else list(range(len(res)))
    if not share:
        st.info("This queue is given to " + plain(", ".join(n for n in queue["assignments"] if n))
                + "; your name is not among them. Pick another queue, or make one.")  # names people typed
        return
    k = _key(queue, who)
    done = _answered(run_id, share, who)
    finished = [i for i in share if all((i, m) in done for m in metrics)]
    pos = _position(k, share, metrics, done)
    i = share[pos]
    st.progress(len(finished) / len(share), text=f"{len(finished)} of {len(share)} rows reviewed by you"
                + (f" · row {pos + 1} of the queue" if queue else ""))
    if queue:
        others = [f"{n} {d} of {t}" for n, (d, t) in progress(loaders.store(), queue).items() if n and n != who]
        if others:
            st.caption("Others in this queue: " + literal(" · ".join(others)))
    if len(finished) == len(share):
        st.success("You have reviewed every row of this queue. The Agreement tab shows what the reviews say.")
    elif i in finished:  # at a done row with others left (skipped, or after it): say which, and go there
        left = [p for p, r in enumerate(share) if r not in finished]
        names = ", ".join(f"row {res.dataset.row_no(share[p])}" + (" (skipped)" if p < pos else "") for p in left[:5])
        c1, c2 = st.columns([4, 1], vertical_alignment="center")
        c1.info(f"All done here except {names}" + (f" and {len(left) - 5} more" if len(left) > 5 else "") + ".")
        c2.button(f"Go to row {res.dataset.row_no(share[left[0]])}", key=f"{k}.goto", on_click=_go,
                  args=(k, share, left[0]), type="primary")
    _last_caption(res, k, done)
    if i not in share:
        return
    blind = bool(queue and queue["blind"])
    active = _active(k, i, metrics, done)
    _nav(k, share, pos, _next_open(share, metrics, done, pos))
    left, right = st.columns([3, 2], gap="large")
    with left:
        st.subheader(f"Row {res.dataset.row_no(i)}")
        shown = not blind or all((i, m) in done for m in metrics)
        rows.row_inputs(res, i, scores=shown)
    with right:
        st.text_input("Note (saved with your next verdict on this row)", key=f"{k}.note.{i}", max_chars=NOTE_MAX_CHARS)
        if st.session_state.get(k + ".refused"):
            st.error(literal(st.session_state[k + ".refused"]))
        for m in metrics:
            spec = next(s for s in res.specs if s.name == m)
            _metric_block(run_id, res, queue, who, i, spec, done.get((i, m)), m == active, blind, k, share,
                          metrics, pos)


def _position(k: str, share: list[int], metrics: list[str], done: dict) -> int:
    """Where the reviewer is: the URL's row if it is in their share, else where they were, else the first
    row they have not finished."""
    row = state.read_row()
    if row in share:
        pos = share.index(row)
    elif k + ".pos" in st.session_state:
        pos = min(st.session_state[k + ".pos"], len(share) - 1)
    else:
        pos = next((p for p, i in enumerate(share) if any((i, m) not in done for m in metrics)), 0)
    st.session_state[k + ".pos"] = pos
    state.write_row(share[pos])
    return pos


def _active(k: str, i: int, metrics: list[str], done: dict) -> str | None:
    """The metric the keys answer: the one picked, else the row's first unanswered one; None on a row whose
    every metric is answered (a key is then aimed at nothing: "Change" picks a verdict to change)."""
    chosen = st.session_state.get(k + ".metric")
    if chosen in metrics:
        return chosen
    return next((m for m in metrics if (i, m) not in done), None)


def _last_caption(res: RunResults, k: str, done: dict) -> None:
    last = st.session_state.get(k + ".last")
    if last and (last[0], last[1]) in done:
        r = done[last]
        spec = next(s for s in res.specs if s.name == last[1])
        judge = r["judge_value"]
        st.caption(f"Saved row {res.dataset.row_no(last[0])}: {last[1]} you {choice_name(spec, r['value'])}, judge "
                   f"{choice_name(spec, None if judge is None else snap(spec, judge))}")


def _nav(k: str, share: list[int], pos: int, skip_to: int | None) -> None:
    c1, c2, c3 = st.columns(3)
    c1.button("Previous row", key=f"{k}.prev", shortcut="Left", disabled=pos == 0, on_click=_go,
              args=(k, share, pos - 1), width="stretch")
    c2.button("Skip row", key=f"{k}.skip", shortcut="S", on_click=_go, args=(k, share, skip_to),
              disabled=skip_to is None, width="stretch",
              help="Leave this row unanswered and go to the next row not yet done (it is offered again at the end)")
    c3.button("Next row", key=f"{k}.next", shortcut="Right", disabled=pos >= len(share) - 1, on_click=_go,
              args=(k, share, pos + 1), width="stretch")


def _set_metric(k: str, metric: str) -> None:
    st.session_state[k + ".metric"] = metric


def _pass_rule(spec, threshold: float) -> str:
    if spec.kind == "label":
        return "passes when not found"
    return f"passes at {'≥' if spec.higher_is_better else '≤'} {threshold:g}"


def _metric_block(run_id: str, res: RunResults, queue: dict | None, who: str, i: int, spec, mine: dict | None,
                  active: bool, blind: bool, k: str, share: list[int], metrics: list[str], pos: int) -> None:
    """One metric of the row: the reviewer's verdict (the digits give it while the metric is active), the
    judge's verdict and reasoning (after the reviewer's own in a blind queue), "agree with the judge" (A)."""
    threshold = res.thresholds[spec.name]
    cell = res.cell(spec.name, i)
    judge = float(cell.value) if cell is not None and cell.status == "ok" and cell.value is not None else None
    with st.container(border=True):
        st.markdown(f"**{rows._md(spec.name)}** · {_pass_rule(spec, threshold)}" + (" · :blue[answering]" if active else ""))
        if mine is not None:
            word = "pass" if human_pass(spec, mine["value"], threshold) else "fail"
            st.caption(f"You: {choice_name(spec, mine['value'])} · {word}"
                       + (" (agreed with the judge)" if mine["agreed"] else ""))
        if not blind or mine is not None:
            if judge is None:
                st.caption("The judge gave this row no value" + (f" ({cell.status})" if cell else " (pending)"))
            else:
                passed = spec.kind_impl.turn_passed(spec, judge, threshold)
                st.caption(f"Judge: {choice_name(spec, snap(spec, judge))}" + (f" ({judge:g})" if snap(spec, judge) != judge
                           else "") + f" · {'pass' if passed else 'fail'}")
                if cell.reason:
                    st.text(cell.reason)  # what a model wrote: text
        else:
            st.caption("The judge's verdict is hidden until you answer (blind review).")
        if not active:
            st.button("Change your verdict" if mine is not None else "Answer this metric",
                      key=f"{k}.{i}.{spec.name}.pick", on_click=_set_metric, args=(k, spec.name))
            return
        common = (run_id, queue, who, i, spec.name)
        tail = (judge, k, share, metrics, pos)
        with st.container(horizontal=True, gap="small"):
            for c in scale(spec):
                st.button(c.name, key=f"{k}.{i}.{spec.name}.{c.key}", shortcut=c.key, on_click=_answer,
                          args=(*common, c.value, False, *tail), type="primary" if mine and mine["value"] == c.value
                          else "secondary")
        hidden = blind and mine is None
        if hidden or judge is None:  # pressed (A) anyway: said why, nothing stored
            why = ("Blind review: give your own verdict first; the judge's is shown once you have answered."
                   if hidden else "The judge gave this row no verdict to agree with.")
            st.button("Agree with the judge", key=f"{k}.{i}.{spec.name}.agree", shortcut="A", on_click=_refuse,
                      args=(k, why), help=why)
        else:
            st.button("Agree with the judge", key=f"{k}.{i}.{spec.name}.agree", shortcut="A", on_click=_answer,
                      args=(*common, snap(spec, judge), True, *tail), help="Take the judge's verdict as yours")
        j = metrics.index(spec.name)
        c1, c2 = st.columns(2)
        c1.button("Previous metric", key=f"{k}.{i}.up", shortcut="Up", disabled=j == 0, on_click=_set_metric,
                  args=(k, metrics[max(0, j - 1)]), width="stretch")
        c2.button("Next metric", key=f"{k}.{i}.down", shortcut="Down", disabled=j == len(metrics) - 1,
                  on_click=_set_metric, args=(k, metrics[min(len(metrics) - 1, j + 1)]), width="stretch")


STATS = (("kappa", "Cohen's κ (pass/fail)", "agreement on pass or fail beyond chance: 1 perfect, 0 no better than chance"),
         ("weighted_kappa", "weighted κ (scale)", "agreement on the scale itself; a near miss (4 for 5) costs less than a far one"),
         ("spearman", "Spearman's ρ", "whether the judge and the people rank rows alike"),
         ("human_only", "rate among reviewed rows", "the people's own rate on the rows they reviewed (Wilson interval)"))


def _pct_or(v, pct: bool) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{100 * v:.1f}%" if pct else f"{v:.3f}"


def agreement_panel(run: dict, res: RunResults) -> None:
    """Per reviewed metric: the corrected rate in a sentence, agreement with intervals, the confusion matrix,
    agreement between reviewers; then every queue's progress per reviewer, and the verdicts to download."""
    import pandas as pd

    found = {n: a for n, a in loaders.agreement(run, res).items() if a.verdicts}
    if not found:
        st.info("No verdicts on this run yet. Review rows in the Review tab; the agreement appears here as they come.")
    for name, a in found.items():
        st.markdown(f"#### {rows._md(name)}")
        st.markdown(f"**{rows._md(a.sentence())}**")
        st.caption(f"{a.reviewed_rows} reviewed rows, {a.verdicts} verdicts. "
                   + {"none": "No sampled queue has reviews, so nothing corrects the rate",
                      "assumed random": "Corrected by reviews imported or brought by the dataset, taken as a random "
                      "sample of the rows"}.get(a.sample, f"Corrected by the sample drawn for {a.sample}")
                   + (f". {a.stale_rows} rows were reviewed against an earlier judgment." if a.stale_rows else "."))
        table = [{"statistic": label, "value": _pct_or(getattr(a, key)[0], key == "human_only"),
                  "95% interval": "–" if getattr(a, key)[1] is None else
                  f"{_pct_or(getattr(a, key)[1], key == 'human_only')} to {_pct_or(getattr(a, key)[2], key == 'human_only')}",
                  "what it says": says} for key, label, says in STATS if getattr(a, key)[0] is not None]
        if a.alpha is not None:
            table.append({"statistic": "Krippendorff's α (between reviewers)", "value": f"{a.alpha:.3f}",
                          "95% interval": "–", "what it says": f"how far the reviewers agree, on {a.alpha_rows} rows "
                          "two or more reviewed"})
        st.table(pd.DataFrame(table).set_index("statistic"))
        if a.confusion:
            st.caption("Judge (rows) against people (columns), on the reviewed rows")
            st.table(pd.DataFrame(a.confusion, index=["judge: fail", "judge: pass"],
                                  columns=["people: fail", "people: pass"]))
    queues = loaders.queues(run["id"])
    if queues:
        st.markdown("#### Queues")
        st.table(plain_table(pd.DataFrame([{"queue": q["name"], "rows": q["strategy"], "reviewer": who or "anyone",
                                            "progress": f"{d} of {t}"} for q in queues
                                           for who, (d, t) in progress(loaders.store(), q).items()])))  # names typed
    if found:
        import json

        from evaluators.read.repeats import repeat_keys
        from evaluators.review.io import export_records, export_text
        from evaluators.review.stats import flat

        specs = {s.name: s for s in res.specs}
        keys = {**res.metrics(), **{k: v for n, a in found.items() for k, v in flat(specs[n], a).items()},
                **repeat_keys(res)}
        rid = run["id"]  # served as Results' exports are (ui.downloads): once, to this browser, while signed in
        c1, c2, c3 = st.columns(3)
        with c1:
            downloads.offer(f"agree.{rid}.json", "metrics.json with the agreement keys", f"metrics-{rid}.json",
                            "application/json", lambda: json.dumps(keys, indent=2, default=str))
        with c2:
            downloads.offer(f"agree.{rid}.jsonl", "Verdicts (JSON lines)", f"verdicts-{rid}.jsonl", "application/jsonl",
                            lambda: export_text(export_records(loaders.store(), rid), False))
        with c3:
            downloads.offer(f"agree.{rid}.csv", "Verdicts (CSV)", f"verdicts-{rid}.csv", "text/csv",
                            lambda: export_text(export_records(loaders.store(), rid), True))
