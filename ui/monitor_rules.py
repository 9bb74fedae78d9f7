"""The Monitoring page's rule form: add a rule to a project, or change one (a new version: every score keeps the
version that made it), checked as ``python -m evaluators monitor rule add`` checks it (one implementation:
``evaluators.monitor.rules.add_rule``). The judge's key is never typed here: the rule names the variable that holds
it, read where the rule is judged (the receiver's process, or a queue worker started for that URL)."""
from __future__ import annotations

import streamlit as st

from evaluators.core.errors import EvalError
from evaluators.core.registry import all_metrics
from evaluators.judge.config import JudgeConfig
from evaluators.judge.prices import Price
from ui import loaders, widgets as w


def rule_form(project: str) -> None:
    """An "Add or change a rule" form; a rule saved is said with its version, a refused one with why."""
    judged = [s.name for s in all_metrics() if s.is_judge]
    with st.form("monitor.rule"):
        c1, c2 = st.columns(2)
        name = c1.text_input("Rule name", max_chars=200, key="monitor.rule.name",
                             help="The same name with other settings makes a new version of that rule.")
        metrics = c2.multiselect("Metrics", judged, key="monitor.rule.metrics")
        rate = c1.slider("Sample rate", 0.0, 1.0, 0.1, 0.01, key="monitor.rule.rate",
                         help="The share of traces judged: the same traces for every rule of the project.")
        flt = c2.text_input("Filter (optional)", max_chars=2000, key="monitor.rule.filter",
                            placeholder='model == "gpt-4o" and latency_ms > 2000 and not error')
        base_url = c1.text_input("Judge base URL (empty: OpenAI)", max_chars=2000, key="monitor.rule.base_url",
                                 placeholder="http://localhost:11434/v1")
        model = c2.text_input("Judge model", "gpt-4o-mini", max_chars=200, key="monitor.rule.model")
        key_env = c1.text_input("Variable holding the judge's key (its NAME, optional)", max_chars=200,
                                key="monitor.rule.key_env", placeholder="OPENAI_API_KEY")
        cap = c2.number_input("Most traces judged an hour (0: no cap)", 0, 10_000_000, 0, key="monitor.rule.cap")
        budget = c1.number_input("Daily budget, USD (0: none)", 0.0, 1e6, 0.0, 0.5, key="monitor.rule.budget")
        price = c2.text_input("Judge model's price (input,cached,output USD per 1M tokens; empty: prices.toml)",
                              max_chars=100, key="monitor.rule.price", placeholder="2.5,1.25,10")
        submitted = st.form_submit_button("Save the rule", type="primary")
    if not submitted:
        return
    try:
        if not name.strip():
            raise EvalError("give the rule a name")
        judge = JudgeConfig(model=model.strip() or "gpt-4o-mini", base_url=base_url.strip() or None,
                            provider="compatible" if base_url.strip() else "openai")
        prices = {judge.model: Price.parse(price).to_dict()} if price.strip() else None
        version = loaders.save_monitor_rule(project, name, metrics, rate, judge.for_storage().to_dict(),
                                            key_env.strip() or None, filter=flt, max_per_hour=cap or None,
                                            budget_per_day=budget or None, prices=prices)
    except (EvalError, ValueError) as e:
        st.error(f"The rule was not saved: {w.plain(str(e))}")
        return
    st.success(f"Rule {w.plain(name.strip())} of project {w.plain(project)}: version {version}. It decides the "
               "traces mapped from now on (python -m evaluators monitor rule run --since TIME judges older ones).")
