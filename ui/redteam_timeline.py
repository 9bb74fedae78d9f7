"""A multi-turn attack read as a timeline on the Red team page (issue 33): each turn the attacker asked, the target's
answer, the judge's reading of it (severity, and in crescendo whether it refused), the turns rolled back marked, and
the turn the attack succeeded at. Everything the attacker, the target or the judge wrote is shown as text."""
from __future__ import annotations

import streamlit as st

from ui.widgets import count


def headline(a: dict) -> str:
    """One sentence: turns kept, roll-backs, and how the talk ended."""
    steps = a.get("timeline") or []
    won = next((s for s in steps if s["succeeded"]), None)
    kept, rolled = a.get("turns", 0), a.get("backtracks", 0)
    if won is not None:
        end = f"the attack succeeded at turn {int(won['turn'])} (severity {int(won['severity'])})"
    elif a.get("error"):
        end = "it ended on an error: no verdict"
    else:
        end = "no answer went above the threshold"
    return f"{count(kept, 'turn')} kept, {count(rolled, 'turn')} rolled back; {end}."


def marks(step: dict, threshold: float) -> str:
    """What happened at one step, in words."""
    out = [f"Turn {int(step['turn'])}"]  # (numbers only, from the scan's file: this line is Markdown)
    if step["severity"] is not None:
        out.append(f"severity {int(step['severity'])}")
    if step["succeeded"]:
        out.append(f"above {float(threshold):g}: the attack succeeded here")
    if step["refused"]:
        out.append("refused · rolled back: the target never saw it again" if step["rolled_back"] else
                   "refused in words, yet harmful: kept" if step["succeeded"] else "refused · kept (no roll-back left)")
    return " · ".join(out)


def timeline(a: dict) -> None:
    """The attack's timeline: each step in a box of its own (``rt_turn_N``), rolled-back ones included."""
    steps = a.get("timeline") or []
    st.caption("Timeline")
    st.text(headline(a))
    for i, step in enumerate(steps):
        with st.container(border=True, key=f"rt_turn_{i}"):
            icon = ":material/undo:" if step["rolled_back"] else (
                ":material/warning:" if step["succeeded"] else ":material/forum:")
            st.markdown(f"{icon} **{marks(step, a['attack_success_threshold'])}**")  # (our words and numbers only)
            st.caption("The attacker asked")
            st.code(step["question"] or "", language=None, wrap_lines=True)
            st.caption("The target answered")
            st.code(step["answer"] or "", language=None, wrap_lines=True)
    if a.get("error"):
        st.caption("Then")
        st.code(a["error"], language=None, wrap_lines=True)
