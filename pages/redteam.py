"""Red team (issue 33): start a scan of a target with the SDK's attack strategies in the background, follow it,
and read a finished scan's scorecard and attacks; past scans picked by the URL's ``scan``."""
import streamlit as st

from ui import loaders_redteam, redteam, redteam_card, redteam_review, state, widgets as w

w.entry()  # first: a run that skipped app.py's router goes through it (ui.widgets.entry)

st.title("Red team")
with w.guard():
    st.caption("A scan sends each objective to the target as it is (baseline) and under each strategy, judges every "
               "answer for harm, and scores how often an attack succeeded, against baseline on the same "
               "objectives. It runs in the background: this page can be closed and opened again.")
    names = loaders_redteam.scans(st.query_params.get("scan"))
    with st.expander("New scan", icon=":material/add:", expanded=not names):
        redteam.new_scan()
    if not names:
        st.info("No scan yet: start one above.")
        st.stop()

    def label(name: str) -> str:
        s = loaders_redteam.state(name)
        return f"{s.get('started_at') or name} · {s['settings'].get('target_model', '?')} · {s['status']}"

    name = state.pick("Scan", "scan", names, names[0], format_func=label)
    s = redteam.status(name)
    if s["status"] in ("completed", "no verdict"):
        card, attacks = loaders_redteam.scan(name)
        redteam_card.scorecard(card, attacks)
        redteam_review.reviews(card)
        redteam_review.compare(name, label)
