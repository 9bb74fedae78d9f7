"""What a judge run costs, in the dashboard: the user's prices, a budget and the Batch API on New
evaluation; the cost per run and per metric, the provider's cached share and batches' states on Results;
a run stopped at its budget resumed with a higher one."""
from __future__ import annotations

import streamlit as st

from evaluators.judge.prices import Price, price_for
from evaluators.run.spec import RunSpec
from evaluators.run.workers import spawn_worker
from ui import loaders
from ui.widgets import literal, session_key

LIST_PRICE = Price(input=0.15, cached_input=0.075, output=0.60)  # gpt-4o-mini's list price: a default to change


def price_inputs(model: str) -> Price:
    """The judge's price per 1M tokens as the user enters it (starting from the operator's prices.toml entry
    for the model, else gpt-4o-mini's list price)."""
    known = price_for(model) or LIST_PRICE
    c1, c2, c3, c4 = st.columns(4)
    help_ = ("Your judge's price in US dollars per 1M tokens" + ("" if price_for(model) else
             "; the default is gpt-4o-mini's list price") + ". Kept with the run, so its cost reads the same later.")
    p_in = c1.number_input("Price per 1M input tokens (USD)", 0.0, value=known.input, step=0.05, key="price.in", help=help_)
    p_cached = c2.number_input("Price per 1M cached input tokens (USD)", 0.0, value=known.cached, step=0.05, key="price.cached",
                               help="Prompt tokens the provider reports it served from its prompt cache")
    p_out = c3.number_input("Price per 1M output tokens (USD)", 0.0, value=known.output, step=0.05, key="price.out",
                            help=help_)
    share = c4.number_input("Batch API share of these prices", 0.0, 1.0, value=known.batch, step=0.05, key="price.batch",
                            help="What the Batch API charges as a share of the above (0.5: half price)")
    return Price(input=p_in, cached_input=p_cached, output=p_out, batch=share)


def run_options() -> dict:
    """Batch mode and the budget for a new run."""
    c1, c2 = st.columns(2)
    batch = c1.checkbox("Batch: half price, results within 24 h", key="new.batch",
                        help="The judge calls go through the provider's Batch API (OpenAI, Azure OpenAI)")
    budget = c2.number_input("Budget (USD, 0 = none)", 0.0, value=0.0, step=1.0, key="new.budget",
                             help="The run stops before its judge calls would cost more; resume it with a higher one")
    return {"batch": batch, "budget": budget or None}


def cost_panel(run: dict) -> None:
    """The run's cost so far (and its estimate), the share of prompt tokens the provider cached, per metric,
    as the CLI's summary says them; and, for a batch run, each batch's state."""
    from evaluators.read.cost import cost_lines

    cost = loaders.run_cost(run)
    if not cost:
        return
    title = (f"Cost: {_usd(cost['cost.usd'])}" + (" · Batch API" if cost.get("cost.batch") else "")
             if "cost.usd" in cost else "Cost")
    if "target.model" in cost:  # the model under test's answers, apart from the judge's calls
        spent = (_usd(cost["target.usd"]) if cost.get("target.usd") is not None else
                 f"{(cost['target.prompt_tokens'] or 0) + (cost['target.completion_tokens'] or 0):,} tokens")
        title += f" · answers by {literal(cost['target.model'])}: {spent}"
    with st.expander(title, expanded=False):
        for line in cost_lines(cost, run["spec"]["metrics"]):
            st.caption(literal(line.strip()))
    if run["spec"].get("batch"):
        batch_states(run)


def batch_states(run: dict) -> None:
    """Each of the run's batches: its state, requests done of all, and by when the provider will have ended it."""
    for b in loaders.batches(run):
        state = "collected" if b["status"] == "collected" else b["status"] or "submitting"
        by = f", expected by {b['expires_at']:%Y-%m-%d %H:%M} UTC" if b["expires_at"] and state != "collected" else ""
        st.caption(literal(f"Batch {b['batch_id'] or '(being submitted)'} (round {b['round']}): {state}, "
                           f"{b['completed']:,} of {b['total']:,} done, {b['failed']:,} failed{by}"))


def stopped_panel(run: dict) -> None:
    """A run that stopped at its budget: why, and a resume with a higher budget."""
    st.warning("The run stopped before exceeding its budget. Results so far are kept.")
    st.code(run["error"] or "", language=None, wrap_lines=True)
    spec = RunSpec.from_dict(run["spec"])
    budget = st.number_input("New budget (USD)", 0.0, value=float(spec.budget or 0) * 2, step=1.0, key="resume.budget")
    if st.button("Resume with this budget", key="resume.raised", disabled=not budget):
        spec.budget = budget
        store = loaders.store()
        store.update_run(run["id"], spec=spec.to_dict())
        spawn_worker(store, run["id"], session_key())  # refuses while a worker holds the run
        loaders.forget_lists()
        st.rerun()


def _usd(v) -> str:
    return "no price given" if v is None else f"${v:,.4f}"
