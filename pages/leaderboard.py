"""WildBench leaderboard across runs and imported judgments: WB-Score with its interval, category
scores when the data has task tags, WB-Reward against a chosen reference with win / tie / loss bars."""
import streamlit as st

from evaluators.core.wb_rules import DEFAULT_LENGTH_PENALTY
from ui import loaders, state, widgets as w, wildbench as wb

w.entry()  # first: a run that skipped app.py's router goes through it (ui.widgets.entry)

st.title("WildBench leaderboard")
with w.guard():
    linked = (st.query_params.get("runs") or "").split(",")[-1] or None  # a link to a run added moments ago
    runs = [r for r in loaders.wildbench_runs(wanted=linked) if r["status"] == "completed"]
    if wb.import_panel(loaders.store(), state.read("K", DEFAULT_LENGTH_PENALTY, int), expanded=not runs):
        loaders.forget_lists()
        st.rerun()  # the run list with the imported runs
    wb.imported_note()
    if not runs:
        st.info("No completed run with a WildBench metric yet. Import published judgments above, or under New "
                "evaluation run wildbench_score or wildbench_pairwise on a WildBench-style dataset.")
        st.page_link("pages/new.py", label="Start a new evaluation", icon=":material/play_arrow:")
        st.stop()
    ids = [r["id"] for r in runs]
    chosen_ids = state.pick_many("Runs", "runs", ids, format_func=w.run_label(runs),
                                 help="Leave empty to use every completed WildBench run.")
    chosen = [r for r in runs if r["id"] in chosen_ids] or runs
    k = st.number_input("Length penalty K (characters; -1 disables)", -1, 100_000, DEFAULT_LENGTH_PENALTY, 50, key="K", bind=state.URL,
                        help="A slight win by a response longer than the other by more than K characters counts "
                             "as a tie. Recomputed from stored verdicts; nothing is re-judged.")
    board = loaders.leaderboard(chosen, int(k))
    tab_score, tab_reward = st.tabs(["WB-Score", "WB-Reward"], key="lbtab", bind=state.URL)
    with tab_score:
        scores = wb.score_table(board)
        if scores.empty:
            st.info("No WB-Score in these runs (they hold pairwise verdicts only).")
        else:
            st.plotly_chart(wb.score_chart(scores), key="lb.score", config={"displayModeBar": False})
            w.table(scores, {c: "%.2f" for c in scores.columns if c not in ("model", "records")}, key="lb.scores")
            st.caption("WB-Score = (mean 1-10 score - 5) x 2 x 10 over every scored response; 95% bootstrap "
                       "interval. Category scores (when rows carry task tags) leave out empty and truncated "
                       "responses; the task macro weights them 0.5 / 1.25 / 1.0 / 0.75 / 1.25.")
            if scores["task_macro"].isna().any():
                st.caption("Task macro shows – where the rows carry no task tags (primary_tag, secondary_tags): the "
                           "category scores it weights need them. WildBench's published judgment files leave them "
                           "out; they are in the WildBench dataset.")
    with tab_reward:
        refs = wb.references(board)
        if not refs:
            st.info("No pairwise verdicts in these runs.")
        else:
            options = refs + (["mixture"] if len(refs) > 1 else [])
            ref = st.selectbox("Reference model", options, key="ref", bind=state.URL)
            rewards = wb.reward_table(board, ref)
            st.plotly_chart(wb.wtl_chart(rewards), key="lb.wtl", config={"displayModeBar": False})
            w.table(rewards, {c: "%.2f" for c in ("WB_reward", "ci95_low", "ci95_high")}, key="lb.rewards")
            st.caption("WB-Reward (x100) for the tested model: win much +1, win +0.5, tie 0, lose -0.5, lose much "
                       "-1, over every pair (pairs with an empty or truncated response count 0 and are left out "
                       "of the counts); 95% bootstrap interval. The mixture is the mean over references.")
