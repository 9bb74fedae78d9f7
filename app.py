"""evaldash: the dashboard's entry point — sign-in (when configured), then a router over the pages in pages/.

``streamlit run app.py`` first imports this file, outside any page, to find the server it runs: the ``st.App``
below, Streamlit's own routes plus the exports' (ui.downloads: big files streamed from disk), behind ui.gate
(nothing served while sign-in is configured but unusable). Every page load
then runs this file as the page's script, which is :func:`route`.
"""
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from ui import warm  # noqa: I001 — first: it quiets the cached loaders' "No runtime found" at the server's start

from ui import auth, downloads, loaders

# The home page is the default, served at "/". A default page is served only at "/", never under its
# own url_path, so no page that a link may name (/runs, /results...) can be the default.
PAGES = [("pages/home.py", "Home", ":material/home:", "home"),
         ("pages/runs.py", "Runs", ":material/list:", "runs"),
         ("pages/datasets.py", "Datasets", ":material/dataset:", "datasets"),
         ("pages/new.py", "New evaluation", ":material/play_arrow:", "new"),
         ("pages/metric.py", "New metric", ":material/add_chart:", "metric"),
         ("pages/results.py", "Results", ":material/bar_chart:", "results"),
         ("pages/review.py", "Review", ":material/rate_review:", "review"),
         ("pages/compare.py", "Compare runs", ":material/compare_arrows:", "compare"),
         ("pages/safety.py", "Risk and safety", ":material/health_and_safety:", "safety"),
         ("pages/attacks.py", "Jailbreak attacks", ":material/shield:", "attacks"),
         ("pages/redteam.py", "Red team", ":material/security:", "redteam"),
         ("pages/leaderboard.py", "WildBench leaderboard", ":material/leaderboard:", "leaderboard"),
         ("pages/pairwise.py", "Pairwise inspector", ":material/balance:", "pairwise"),
         ("pages/monitoring.py", "Monitoring", ":material/monitor_heart:", "monitoring")]
HOME = "home"


def route() -> None:
    st.set_page_config(page_title="evaldash", page_icon="📊", layout="wide")  # an emoji favicon is drawn locally; a :material: one is fetched from Google
    if not auth.signed_in():
        # Every address serves only the sign-in form, under its own URL: a shared deep link keeps its
        # address and query, and opens once signed in. No page of the app runs before that. A sign-in
        # that is configured but unusable serves, in its place, what is wrong (ui.auth.settings).
        st.session_state.pop("routed", None)
        downloads.forget_session()  # a session signed out: its download links stop working at once
        st.navigation([st.Page("ui/sign_in.py", title=title, url_path=path, default=path == HOME)
                       for _, title, _, path in PAGES], position="hidden").run()
        st.stop()
    loaders.store()  # opens the store and adds the bundled samples on first start
    st.session_state["routed"] = True  # see ui.widgets.guard: pages render only after this point

    st.navigation([st.Page(file, title=title, icon=icon, url_path=path, default=path == HOME)
                   for file, title, icon, path in PAGES]).run()


if get_script_run_ctx(suppress_warning=True) is None:  # imported by `streamlit run` to find its server
    app = st.App(__file__, routes=downloads.routes())
    from ui import gate

    app = gate.Guarded(app)  # a sign-in configured but unusable: every request refused at the door
    from pathlib import Path

    warm.warm(Path(__file__).resolve().parent, [file for file, *_ in PAGES])  # the pages' imports, ahead of them
else:
    route()
