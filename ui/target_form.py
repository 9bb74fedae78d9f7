"""New evaluation's "Generate answers with a model" (issue 36): for a dataset of questions only (or, on request, to
replace a dataset's answers), the model under test answers each question before the judge sees it.

The target is set as a judge is (``ui.judge_form``: the operator's named endpoints, or a URL and a key typed here,
kept in this browser session only, never stored) with its own Test connection; a prompt template and a system
message are optional. The answers are asked once each (the store's call cache: a second start asks nothing again),
stored as a new dataset "<questions> · <name of these answers>", and the run keeps the target's model and cost apart
from the judge's. Two runs answered under two names from one dataset of questions are two variants of one
experiment: the Compare page names them in its paired sentences.
"""
from __future__ import annotations

import dataclasses

import streamlit as st

from evaluators.core.errors import EvalError
from evaluators.judge.config import JudgeConfig
from ui import judge_form, loaders, widgets as w

PROMPT_HELP = ("Optional: a template over the row's fields ({{ query }}, {{ context }}, {{ ground_truth }}); a "
               "[system] section, then a [user] line, gives a system message. Empty: the question is the user's "
               "message and its context is given as reference documents.")


@dataclasses.dataclass
class TargetChoice:
    config: JudgeConfig | None  # None while the form lacks the model or its address
    api_key: str | None
    prompt: str | None
    system: str | None
    name: str


def answers_section(ds) -> TargetChoice | None:
    """The section, when answers are to be generated (always for questions only); None otherwise."""
    st.subheader("Answers")
    if ds.questions_only():
        st.caption("This dataset has questions only: a model answers each question first, then the answers are "
                   "judged.")
    elif not st.toggle("Generate answers with a model (the dataset's answers are left as they are; the run judges "
                       "new ones)", key="new.target.on"):
        return None
    cfg, key = judge_form.judge_settings(prefix="target", who="target")
    c1, c2 = st.columns(2)
    system = c1.text_area("System message (optional)", key="new.target.system", height=90)
    prompt = c2.text_area("Prompt template (optional)", key="new.target.prompt", height=90, help=PROMPT_HELP)
    name = st.text_input("Name these answers", key="new.target.name", placeholder=cfg.model if cfg else "",
                         help="Runs of the same questions answered under two names (two prompts, two models) are "
                              "compared on the Compare page by these names")
    return TargetChoice(cfg, key, prompt.strip() or None, system.strip() or None,
                        name.strip() or (cfg.model if cfg else ""))


def without_response(missing: dict[str, list[str]]) -> dict[str, list[str]]:
    """Metric availability once answers are generated: a metric lacking only the response is available."""
    return {m: [f for f in lacking if f != "response"] for m, lacking in missing.items()}


def generate(dataset_id: str, choice: TargetChoice, cost: dict) -> tuple[str, dict] | None:
    """Ask the target for every answer (progress shown), store the answered dataset; (its id, the facts the run
    keeps), or None after saying what went wrong (nothing stored)."""
    from evaluators.data.loading import load_dataset
    from evaluators.judge.prices import price_for
    from evaluators.run.target import QUESTION_FIELDS, Target, answer_rows, target_facts

    ds = loaders.dataset(dataset_id)
    target = Target(choice.config, choice.system, choice.prompt, name=choice.name)
    records = [dict(r) for r in ds.records]
    mapping = {f: c for f, c in ds.mapping.items() if f in QUESTION_FIELDS}
    price = price_for(choice.config.model, cost.get("prices"))
    bar = st.progress(0.0, text="Asking the target…")

    def progress(done: int, total: int) -> None:
        bar.progress(done / max(total, 1), text=f"{done:,} of {total:,} answers")

    try:
        usage = answer_rows(loaders.store(), records, mapping, target, choice.api_key, progress, price=price,
                            budget=cost.get("budget"))
    except EvalError as e:  # a template that does not render, an unreadable setting: said, nothing stored
        st.error("The target could not be asked: " + w.literal(_hidden(str(e), choice.api_key)))
        return None
    if usage.failed:
        i, why = next(iter(sorted(usage.failed.items())))
        st.error(w.literal(f"The target did not answer {len(usage.failed)} of {len(records)} "
                           f"questions (first: row {i + 1}: {_hidden(why, choice.api_key)}). The answers it gave are "
                           "kept: start again to ask only the others."))
        return None
    answered = load_dataset(records, {**ds.mapping, "response": "response"}, name=f"{ds.name} · {choice.name}")
    new_id = loaders.store().save_dataset(answered)
    loaders.forget_lists()
    return new_id, target_facts(target, usage, experiment=ds.name)


def _hidden(text: str, key: str | None) -> str:
    return text.replace(key, "***") if key else text
