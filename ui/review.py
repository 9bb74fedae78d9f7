"""People's verdicts where the Results page shows a run: beside the judge's in a row's detail, as a mark in
the rows table, and as the corrected rate under the headline. (The Review page itself: ui/review_page.py.)"""
from __future__ import annotations

from urllib.parse import quote, urlencode

import streamlit as st

from evaluators.core.errors import EvalError
from evaluators.core.registry import MetricSpec
from evaluators.read.results import RunResults
from evaluators.core.scales import choice_name, human_pass, reviewable
from ui import loaders, state
from ui.widgets import literal


def run_id_of(res: RunResults) -> str | None:
    pinned = getattr(res, "state", None)
    return pinned[0] if pinned else getattr(res, "run_id", None)


def row_verdicts(res: RunResults, i: int) -> dict[str, list[dict]]:
    """Metric -> the verdicts people gave row ``i`` (each with ``stale``: given against an earlier judgment)."""
    rid = run_id_of(res)
    if rid is None:
        return {}
    out: dict[str, list[dict]] = {}
    for r in loaders.store().reviews(rid, rows=[i]):
        if r["value"] is not None:
            out.setdefault(r["metric"], []).append(r)
    for metric, given in out.items():
        now = loaders.store().judged_times(rid, metric, [i]).get(i)
        for r in given:
            r["stale"] = bool(now and r["judged_at"] and now > r["judged_at"])
    return out


def people_line(spec: MetricSpec, threshold: float, verdicts: list[dict]) -> None:
    """One caption: each reviewer's verdict in the metric's terms, pass or fail, and whether it agreed with
    the judge or answered an earlier judgment of the row."""
    parts = []
    for r in verdicts:
        word = "pass" if human_pass(spec, r["value"], threshold) else "fail"
        extra = " (agreed with the judge)" if r["agreed"] else ""
        extra += " (reviewed against an earlier judgment)" if r.get("stale") else ""
        parts.append(f"{r['reviewer']}: {choice_name(spec, r['value'])} · {word}{extra}")
    st.caption("People: " + literal(" | ".join(parts)))  # reviewer names are typed by people: literal
    notes = [f"{r['reviewer']}: {r['note']}" for r in verdicts if r.get("note")]
    for n in notes:
        st.text(n)  # a note as written


def review_link(run_id: str, row: int | None = None, queue: str | None = None) -> str:
    """The Review page's address for a run (at a row, in a queue), relative to the app."""
    params = [("run", run_id)] + ([("queue", queue)] if queue else []) + ([("row", state.row_param(row))] if row is not None else [])
    return "review?" + urlencode(params, quote_via=quote)


def distrusted(run: dict, res: RunResults) -> set[str]:
    """The run's metrics whose judge disagrees with the reviewers more than chance (their rate is not to be
    read; its card says so); none when the reviews cannot be read (results_summary says why)."""
    try:
        return {name for name, a in loaders.agreement(run, res).items() if a.verdicts and a.distrusted}
    except EvalError:
        return set()


def results_summary(run: dict, res: RunResults) -> None:
    """Under the Results page's headline, for each reviewed metric: its rate as judged and corrected by
    the reviews, in one sentence, with Cohen's kappa; nothing when no one has reviewed the run."""
    from ui.rows import _md  # (rows imports this module: read at call time)

    for name, both in loaders.repeats(run, res).items():
        if both["jury"]:
            got = both["jury"]
            alpha = "" if got["alpha"] is None else f"; Krippendorff's α {got['alpha']:.2f}"
            _split_line(name, f"a jury of {len(got['jurors'])} judges ({', '.join(got['jurors'])}) splits on pass or "
                        "fail on", got, alpha + "; the row's value is their median")
        if both["repeat"]:
            got = both["repeat"]
            kappa = "" if got["fleiss_kappa"] is None else f"; Fleiss κ across judgments {got['fleiss_kappa']:.2f}"
            _split_line(name, f"judged {got['repeat']} times per row; the verdict flips on", got, kappa,
                        f"[review the flipping rows]({review_link(run['id'])}&view=Queues)")
    try:
        found = loaders.agreement(run, res)
    except EvalError as e:  # a dataset's human_<metric> column off the scale: said here, the page goes on
        st.warning("People's verdicts could not be read: " + literal(e))
        return
    lines = [(name, a) for name, a in found.items() if a.verdicts]
    if not lines:
        if any(reviewable(s) for s in res.specs):
            st.caption(f"No one has reviewed this run yet: [review its rows]({review_link(run['id'])}) to learn "
                       "how far the judge can be trusted and to correct its rates.")
        return
    for name, a in lines:  # the sentence gives κ with its interval and its band in words
        line = (f"**{_md(name)}**: {_md(a.sentence())} · "
                f"[agreement]({review_link(run['id'])}&view=Agreement)")  # ours: names, numbers, words
        if a.distrusted:  # the judge disagrees with the reviewers more than chance: this rate is not to be read
            st.error(line, icon=":material/report:")
        else:
            st.markdown(line)


def _split_line(name: str, lead: str, got: dict, tail: str, link: str = "") -> None:
    """"**metric**: <lead> 12.5% of rows [3.1, 40.2]<tail> · <link>" (a share of rows with its interval)."""
    from ui.rows import _md

    lo, hi = got["flip_share_ci95"]
    share = f"{lead} {100 * got['flip_share']:.1f}% of rows [{100 * lo:.1f}, {100 * hi:.1f}]{tail}"
    st.markdown(f"**{_md(name)}**: {_md(share)}" + (f" · {link}" if link else ""))


def review_row_link(res: RunResults, i: int) -> None:
    """Under a row's heading: a link that opens the Review page at this row (in a queue holding it)."""
    rid = run_id_of(res)
    if rid and any(reviewable(s) for s in res.specs):
        st.markdown(f"[Review this row]({review_link(rid, i)})")


def _queue_rows(res: RunResults, filters: dict) -> None:
    import numpy as np

    from evaluators.review import make_queue

    rid = run_id_of(res)
    ids = res.select(**filters) if hasattr(res, "select") else res.table(**filters).index.to_numpy()
    metrics = [s.name for s in res.specs if reviewable(s)]
    qid = make_queue(loaders.store(), rid, res, "rows of a filter", "rows", metrics, None,
                     rows=[int(i) for i in np.asarray(ids)], blind=False)
    st.session_state["review.made"] = qid


def queue_of_filter(res: RunResults, filters: dict) -> None:
    """A button that makes a review queue of the rows the filters match (then opens it on the Review page)."""
    rid = run_id_of(res)
    if not rid or not any(reviewable(s) for s in res.specs):
        return
    made = st.session_state.pop("review.made", None)
    if made:
        st.switch_page("pages/review.py", query_params={"run": rid, "queue": made})
    st.button("Review these rows", key="rows.review", on_click=_queue_rows, args=(res, filters),
              help="Make a review queue of every row the filters above match, and open it on the Review page "
                   "(rows chosen on purpose: their reviews measure agreement, not the run's corrected rate).")
