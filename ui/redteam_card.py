"""A finished red-team scan read on the Red team page (issue 33): its scorecard (``scorecard.json``) per risk category
x strategy, with errors apart, the ASR's 95% interval and the uplift over baseline; the ASR at every threshold 1-7 as
a chart; and its attacks, one selected to read its conversation. Every number is the scorecard's own, shown as it
is; what the target, the objectives or the judge wrote is shown as text (``st.text``, ``st.code``, table cells),
never Markdown or HTML."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from ui import redteam_timeline
from ui.widgets import count, plain, table, url_picked_table

CELL_CHARS = 160  # a table cell's text; the conversation below has all of it
VERDICT = {True: "success", False: "resisted", None: "no verdict"}


def _pct(v) -> str:
    return "–" if v is None else f"{v:.1%}"


def _interval(ci) -> str:
    return "–" if not ci or ci[0] is None else f"{ci[0]:.1%} – {ci[1]:.1%}"


def _pts(v) -> str:
    return f"{100 * v:+.1f} pts"


def summary(card: dict) -> None:
    """The scan in four numbers: attacks, successes, ASR over the attacks with a verdict, and those without one."""
    overall, errors = card["risk_category_summary"][0], card["errors"]
    c = st.columns(4)
    c[0].metric("Attacks", f"{overall['overall_total']:,}")
    c[1].metric("Successful attacks", f"{overall['overall_successful_attacks']:,}")
    c[2].metric("ASR", f"{overall['overall_asr']:.2f}%", help="successes among the attacks with a verdict")
    c[3].metric("Without a verdict", f"{errors['total']:,}",
                help=f"in no rate: {errors['target']} target, {errors['attacker']} attacker and {errors['judge']} "
                     "judge errors")


def cells(card: dict) -> pd.DataFrame:
    """Per risk category x strategy: the scorecard's ``attack_cells`` beside its ``uplift_over_baseline``."""
    uplift = {(u["risk_category"], u["attack_technique"]): u for u in card["uplift_over_baseline"]}
    rows = []
    for c in card["attack_cells"]:
        u = uplift.get((c["risk_category"], c["attack_technique"]), {})
        has = u.get("difference") is not None
        rows.append({"risk category": c["risk_category"], "strategy": c["attack_technique"],
                     "complexity": c["attack_complexity"], "attacks": c["attacks"], "judged": c["n"],
                     "successes": c["successes"], "errors": c["errors"], "ASR": _pct(c["asr"]),
                     "ASR 95% CI": _interval(c["asr_ci95"]),
                     "uplift over baseline": _pts(u["difference"]) if has else "–",
                     # (no interval on too few pairs: the difference alone)
                     "uplift 95% CI": f"{_pts(u['ci95'][0])} – {_pts(u['ci95'][1])}"
                     if has and u.get("ci95") and None not in u["ci95"] else "–",
                     "McNemar p": f"{u['mcnemar_p']:.3g}" if has and u.get("mcnemar_p") is not None else "–"})
    return pd.DataFrame(rows)


def cells_table(card: dict) -> None:
    st.markdown("#### Attack success by risk category and strategy")
    st.caption("ASR: successes among the attacks judged (errors are apart, in no rate), with its 95% Wilson "
               "interval. Uplift: the strategy's ASR minus baseline's on the same objectives (those judged under "
               "both), its 95% interval and McNemar's exact p.")
    table(cells(card), key="rt.cells", widths={"ASR 95% CI": "medium", "uplift 95% CI": "medium"})


def threshold_chart(card: dict) -> None:
    """ASR were the threshold each of 1-7, one line per risk category x strategy."""
    points = [{"threshold": t, "ASR": a, "cell": f"{c['risk_category']} · {c['attack_technique']}"}
              for c in card["asr_by_threshold"] for t, a in zip(c["thresholds"], c["asr"])]
    if not points:
        return
    st.markdown("#### ASR by threshold")
    used = ", ".join(f"{k} {v}" for k, v in card["parameters"]["attack_success_thresholds"].items())
    st.caption(f"An attack succeeds when the judged severity is above the threshold (this scan: {plain(used)}); "
               "here the ASR at each threshold from 1 to 7, so the choice is read, not assumed.")
    spec = {"mark": {"type": "line", "point": True},
            "encoding": {"x": {"field": "threshold", "type": "ordinal", "title": "threshold (severity above it)"},
                         "y": {"field": "ASR", "type": "quantitative", "axis": {"format": ".0%"},
                               "scale": {"domain": [0, 1]}},
                         "color": {"field": "cell", "type": "nominal", "title": "category · strategy"},
                         "tooltip": [{"field": "cell"}, {"field": "threshold"},
                                     {"field": "ASR", "format": ".1%"}]}}
    st.vega_lite_chart(pd.DataFrame(points), spec, width="stretch", key="rt.thresholds")


def over_refusal(card: dict) -> None:
    """With --over-refusal: per category x strategy, harmless requests refused, with the rate's 95% interval."""
    if not card.get("over_refusal"):
        return
    st.markdown("#### Over-refusal")
    st.caption("Harmless requests on the same topics, rewritten by the same strategies and sent to the same target, "
               "judged for a refusal: a target that resists an encoding by refusing whatever is encoded shows here.")
    table(pd.DataFrame([{"risk category": c["risk_category"], "strategy": c["attack_technique"],
                         "requests": c["requests"], "judged": c["n"], "refused": c["refused"], "errors": c["errors"],
                         "refusal rate": _pct(c["refusal_rate"]), "95% CI": _interval(c["refusal_rate_ci95"])}
                        for c in card["over_refusal"]]), key="rt.over_refusal")


def understanding(card: dict) -> None:
    """With --understanding: per category x strategy, the share of answers that understood the disguised request,
    and the ASR among those."""
    if not card.get("understanding"):
        return
    st.markdown("#### Understanding")
    st.caption("Each answer but baseline's judged for whether the target understood what the disguised request "
               "asked: \"resisted\" is not read where the target only failed to decode it.")
    table(pd.DataFrame([{"risk category": c["risk_category"], "strategy": c["attack_technique"], "judged": c["n"],
                         "understood": c["understood"], "share understood": _pct(c["understood_rate"]),
                         "95% CI": _interval(c["understood_rate_ci95"]),
                         "successes when understood": c["successes_when_understood"],
                         "ASR among understood": _pct(c["asr_when_understood"])}
                        for c in card["understanding"]]), key="rt.understanding")


def usage_line(card: dict) -> None:
    """What the scan cost: the target's calls and tokens, the judge's verdicts and tokens, per successful attack."""
    u = card.get("usage")
    if not u:
        return
    t, j = u["target"], u["judge"]
    per = u.get("judge_tokens_per_successful_attack")
    usd = u.get("judge_usd_per_successful_attack")
    st.text(f"Target: {t['calls']:,} calls, {t['from_cache']:,} from the cache, "
            f"{t['prompt_tokens'] + t['completion_tokens']:,} tokens · judge: {j['verdicts']:,} verdicts "
            f"({j['from_cache']:,} from the cache), {j['prompt_tokens'] + j['completion_tokens']:,} tokens · "
            + ("no successful attack" if per is None else f"{per:,.0f} judge tokens per successful attack")
            + ("" if usd is None else f", ${usd:,.4f} per successful attack"))


def _cut(text) -> str | None:
    if text is None:
        return None
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS] + "…"


def attacks_table(attacks: list[dict]) -> dict | None:
    """The attacks, one line each; a click selects one (``attack`` in the URL: its id). Returns it (None: none)."""
    st.markdown("#### Attacks")
    st.caption(f"{count(len(attacks), 'attack')}. Select one (the box at its left) to read its conversation.")
    ids = [a["id"] for a in attacks]
    frame = pd.DataFrame([{"attack": a["id"], "risk category": a["risk_category"], "strategy": a["attack_technique"],
                           "severity": a["severity"], "verdict": VERDICT[a["attack_success"]],
                           "prompt": _cut(a["prompt"]), "error": _cut(a["error"])} for a in attacks])
    chosen = url_picked_table(frame, ids, "attack", key="rt.attacks", widths={"prompt": "large"})
    if chosen is not None and chosen not in ids:
        st.error("Attack not found: the link names one this scan does not have.")
        st.text(f"attack = {chosen}")  # the link's value, as text
        return None
    return attacks[ids.index(chosen)] if chosen in ids else None


def conversation(a: dict) -> None:
    """One attack: its objective, each turn of its conversation and the judge's verdict, all as text."""
    with st.container(border=True, key="rt_attack"):
        st.subheader("Conversation", anchor=False)
        st.text(f"{a['id']} · {a['risk_category']} · {a['attack_technique']} ({a['attack_complexity']})")
        st.caption("Objective")
        st.text(a.get("objective") or "")
        if a.get("timeline"):  # a multi-turn attack: every turn asked, those rolled back included
            redteam_timeline.timeline(a)
        for turn in [] if a.get("timeline") else a.get("conversation") or []:
            st.caption("The target" if turn["role"] == "assistant" else f"Sent ({turn['role']})")
            st.code(turn["content"], language=None, wrap_lines=True)
        st.caption("Verdict")
        sev = "–" if a["severity"] is None else f"{a['severity']:g}"
        st.text(f"{VERDICT[a['attack_success']]} · severity {sev} (success above {a['attack_success_threshold']:g})")
        if a.get("reason"):
            st.text(a["reason"])
        if a.get("error"):
            st.code(a["error"], language=None, wrap_lines=True)


def scorecard(card: dict, attacks: list[dict]) -> None:
    """The whole reading of a finished scan."""
    summary(card)
    usage_line(card)
    cells_table(card)
    threshold_chart(card)
    over_refusal(card)
    understanding(card)
    picked = attacks_table(attacks)
    if picked is not None:
        conversation(picked)
