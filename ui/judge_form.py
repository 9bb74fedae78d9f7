"""The judge's settings: for a new run (New evaluation, with its cost estimate) and for a retry of a
run's failed rows (Results, Errors tab). A key typed here stays in this browser session only."""
from __future__ import annotations

import dataclasses
import os
import re

import streamlit as st

from evaluators import EvalError
from evaluators.judge.config import JudgeConfig, judge_url, named_judges
from evaluators.run.spec import MAX_REPEAT
from evaluators.read.results import RunResults
from evaluators.run.spec import RunSpec
from evaluators.run.workers import retry_failed, worker_stopped
from ui import loaders
from ui.widgets import ACTIVE, KEPT, count, judged_metrics, literal, plain, session_key, table


PROVIDERS = {"OpenAI-compatible base URL": "compatible", "OpenAI": "openai", "Azure OpenAI": "azure"}
NAMED = "Server judge: "  # prefix of an operator's named judge in the provider list
_SECRET = re.compile(r"\b(sk-|key-)[\w*\-.]{4,}")  # a (masked) key a provider may echo in an error


def _kept(prefix: str, name: str, default):
    """Where a judge widget starts: on New evaluation what this browser session last set there (Streamlit
    drops a widget's value once a page without it is shown), else ``default``. Kept in session state only:
    never in the URL, the store, a file or a log; a retry's settings start from the run's judge instead."""
    return st.session_state.get(KEPT + name, default) if prefix == "judge" else default


def _keep(prefix: str, **values) -> None:
    if prefix == "judge":
        for name, value in values.items():
            st.session_state[KEPT + name] = value


def _provider_choice(options: list[str], current: JudgeConfig | None, kept: str | None = None) -> int:
    if kept in options:
        return options.index(kept)
    if current is None:
        return 0
    if current.judge_name and NAMED + current.judge_name in options:
        return options.index(NAMED + current.judge_name)
    for label, provider in PROVIDERS.items():
        if provider == current.provider and not current.judge_name and label in options:
            return options.index(label)
    return 0


def judge_settings(prefix: str = "judge", current: JudgeConfig | None = None,
                   who: str = "judge") -> tuple[JudgeConfig | None, str | None]:
    """Judge provider, model and sampling, with a "Test connection" button.

    The operator's named judges come first, picked by name: their URL and key stay on the server
    (nothing to type, nothing shown). The free-form options take a URL and a key typed here, kept
    in this browser session only. Nothing is pre-filled but ``current`` or, on New evaluation, what
    this browser session set there before (:func:`_kept`): no made-up model or URL.

    Args:
        prefix: widget keys' prefix ("judge" on New evaluation; another for a retry's settings).
        current: settings to start from (a run's judge, for a retry).
        who: what the model is called on the form ("judge"; "target" for the model that answers the questions).
    Returns:
        (the config, or None while the model or address is missing; the key typed here, if any).
    """
    named = named_judges()
    options = [NAMED + n for n in named] + list(PROVIDERS)
    choice = st.selectbox(who.capitalize(), options, index=_provider_choice(options, current, _kept(prefix, "provider", None)),
                          key=f"{prefix}.provider")
    c3, c4, c5 = st.columns(3)
    temperature = c3.number_input("Temperature", 0.0, 2.0, _kept(prefix, "temperature", current.temperature if current
                                                                  else 0.0), 0.1, key=f"{prefix}.temperature")
    max_tokens = c4.number_input("Max tokens", 16, 8192, _kept(prefix, "max_tokens", current.max_tokens if current
                                                               else 800), 16, key=f"{prefix}.max_tokens")
    concurrency = c5.number_input("Concurrency", 1, 128, _kept(prefix, "concurrency", current.concurrency if current
                                                               else 8), key=f"{prefix}.concurrency")
    _keep(prefix, provider=choice, temperature=temperature, max_tokens=max_tokens, concurrency=concurrency)
    sampling = dict(temperature=float(temperature), max_tokens=int(max_tokens), concurrency=int(concurrency))
    key_field = "judge_api_key" if prefix == "judge" else f"{prefix}.api_key"
    if choice.startswith(NAMED):
        nj = named[choice[len(NAMED):]]
        st.caption(f"Configured on the server: model {literal(nj.model)}; its address and key are not shown.")
        cfg = JudgeConfig(model=nj.model, provider=nj.provider, base_url=nj.base_url, azure_endpoint=nj.azure_endpoint,
                          api_version=nj.api_version, judge_name=nj.name, **sampling)
        test_connection(prefix, cfg, None, who)
        return cfg, None
    provider = PROVIDERS[choice]
    same = current is not None and not current.judge_name and current.provider == provider
    model = st.text_input("Model (Azure: deployment)", _kept(prefix, "model", current.model if same else ""),
                          key=f"{prefix}.model", placeholder="the model's name, e.g. gpt-4o-mini or llama3.1")
    base_url = endpoint = None
    if provider == "compatible":
        base_url = st.text_input("Base URL", _kept(prefix, "base_url", (current.base_url or "") if same else ""),
                                 key=f"{prefix}.base_url",
                                 placeholder="e.g. http://localhost:11434/v1 (Ollama), http://host:8000/v1 (vLLM)")
        _keep(prefix, base_url=base_url)
        base_url = base_url.strip()
    elif provider == "azure":
        endpoint = st.text_input("Azure endpoint", _kept(prefix, "endpoint", current.azure_endpoint if same and
                                                         current.azure_endpoint else
                                                         os.environ.get("AZURE_OPENAI_ENDPOINT", "")),
                                 key=f"{prefix}.endpoint")
        _keep(prefix, endpoint=endpoint)
        endpoint = endpoint.strip()
    _keep(prefix, model=model)
    model = model.strip()
    if provider == "compatible":
        hint = "sent only to this base URL; kept in this browser session only"
    else:
        env = "AZURE_OPENAI_API_KEY" if provider == "azure" else "OPENAI_API_KEY"
        hint = (f"leave empty to use the server's {env}" if os.environ.get(env)
                else "kept in this browser session only")
    typed = st.text_input("API key", _kept(prefix, "api_key", ""), type="password", key=key_field, help=hint,
                          placeholder=hint) or None
    _keep(prefix, api_key=typed)
    missing = [what for what, value in (("the model", model), ("the base URL", base_url if provider == "compatible" else 1),
                                        ("the Azure endpoint", endpoint if provider == "azure" else 1)) if not value]
    if missing:
        st.info(f"Give {' and '.join(missing)} of the {who}.")
        st.button("Test connection", key=f"{prefix}.test", icon=":material/network_check:", disabled=True,
                  help=f"Give {' and '.join(missing)} first")  # where it will be, so no one looks for it
        return None, typed
    cfg = JudgeConfig(model=model, provider=provider, base_url=base_url or None, azure_endpoint=endpoint or None, **sampling)
    test_connection(prefix, cfg, typed, who)
    return cfg, typed


def several(judge: JudgeConfig) -> tuple[int, list[JudgeConfig]]:
    """How many judgments per task (``--repeat``) and which further configured judges form a jury with the
    chosen one; kept for the browser session like the rest of the form."""
    c1, c2 = st.columns([1, 3])
    repeat = int(c1.number_input("Judge each row K times", 1, MAX_REPEAT, 1, key="new.repeat", persist_state="session",
                                 help="Each judgment its own call and cache entry; the row's value is their mean "
                                      "(scores), median (severities) or majority (labels), and the Results page "
                                      "says how often they disagree"))
    others = [n for n in named_judges() if n != judge.judge_name]
    jury = c2.multiselect("Jury: also ask these judges", others, key="new.jury", persist_state="session",
                          help="Judges configured on this server (judges.toml). Every task is asked of each; the "
                               "row's value is their median (labels: majority)") if others else []
    return repeat, [judge.with_(judge_name=n, base_url=None, azure_endpoint=None).for_storage() for n in jury]


def test_connection(prefix: str, cfg: JudgeConfig, api_key: str | None, who: str = "judge") -> None:
    """One call to the judge (or target) on request: its answer, or the exact error (a key is never shown)."""
    from evaluators.judge.client import check_judge

    if not st.button("Test connection", key=f"{prefix}.test", icon=":material/network_check:"):
        return
    quick = dataclasses.replace(cfg, max_retries=1, timeout=min(cfg.timeout, 15.0))
    where = f"the server's {who}" if cfg.judge_name else judge_url(cfg)
    try:
        with st.spinner(f"Asking the {who}…"):
            calls = check_judge(quick, api_key)
    except EvalError as e:
        msg = str(e)
        if api_key:
            msg = msg.replace(api_key, "***")
        if cfg.judge_name:  # a named judge's address stays on the server
            msg = msg.replace(judge_url(cfg.resolved()), f"(the server's {who})")
        st.error(f"The {who} did not answer: " + literal(_SECRET.sub(r"\1***", msg)))
        # every setting that failed stays refused (going back to an earlier failed URL is no way round)
        st.session_state[f"{prefix}.failed"] = st.session_state.get(f"{prefix}.failed", set()) | {_tested(cfg, api_key)}
        return
    st.session_state.get(f"{prefix}.failed", set()).discard(_tested(cfg, api_key))
    st.success(f"The {who} answered: {literal(where)} · model {literal(cfg.model)} · {count(calls, 'call')}.")


def _tested(cfg: JudgeConfig, api_key: str | None) -> str:
    """Names these judge settings (the key by a digest, held in this browser session's memory only)."""
    import hashlib
    import json

    key = hashlib.sha256((api_key or "").encode()).hexdigest()[:16]
    return json.dumps([cfg.identity(), key], sort_keys=True, default=str)


def failed_test(cfg: JudgeConfig | None, api_key: str | None, prefix: str = "judge") -> bool:
    """Whether the connection test failed for exactly these settings, this time or an earlier one in this browser
    session (a later test that passes with them clears it)."""
    return cfg is not None and _tested(cfg, api_key) in st.session_state.get(f"{prefix}.failed", set())


def estimate_panel(dataset_id: str, spec: RunSpec) -> dict:
    """Judge calls, tokens, cost and time before a run starts; classic-only runs cost nothing, so no cost.
    The figures come from ``loaders.estimate`` (each judge metric estimated once, not on every rerun); on a
    big dataset a new one is worked out in the background while the page stays usable.

    Returns:
        ``prepare_run``'s ``cost``: the prices entered (kept with the run), batch mode, the budget, the estimate.
    """
    from ui import cost as cost_ui

    judge = spec.judge
    if judge is None:
        st.caption("Classic metrics only: computed on this server, no judge calls and no cost.")
        return {}
    price = cost_ui.price_inputs(judge.model)
    options = cost_ui.run_options()
    out = {"prices": {judge.model: price.to_dict()}, **options}
    est = loaders.estimate(dataset_id, spec)
    if est is None:
        _estimating(dataset_id, spec)
        return out
    times = spec.repeat * max(1, len(spec.jurors()))  # every judgment of a task, from every judge of a jury
    if times > 1:
        est = {**est, **{k: est[k] * times for k in ("judge_calls", "prompt_tokens", "completion_tokens")}}
        st.caption(f"{spec.repeat} judgment{'s' if spec.repeat > 1 else ''} per task from each of "
                   f"{max(1, len(spec.jurors()))} judge{'s' if len(spec.jurors()) > 1 else ''}: "
                   f"the figures are {times} times one judgment's")
    per_call = est["latency_s"] or st.session_state.get("price.latency", 2.0)
    cost = price.cost(est["prompt_tokens"], est["completion_tokens"], batch=options["batch"])
    seconds = est["judge_calls"] * per_call / max(1, judge.concurrency)
    cols = st.columns(4)
    cols[0].metric("Judge calls", est["judge_calls"], help=f"{est['cached']} more answered from the cache")
    cols[1].metric("Tokens (est.)", f"{est['prompt_tokens'] + est['completion_tokens']:,}",
                   help=f"{est['prompt_tokens']:,} in (counted with {plain(est.get('tokenizer') or 'characters / 4')}) + "
                        f"{est['completion_tokens']:,} out")
    cols[2].metric("Cost (est., USD)", f"${cost:,.4f}", help="at the prices per 1M tokens above, in US dollars"
                   + (", at the Batch API's share" if options["batch"] else ""))
    cols[3].metric("Time (est.)", "within 24 h" if options["batch"] else f"{seconds:.0f} s",
                   help=f"{per_call:.2f} s a call" + (" (median of this model's past calls)" if est["latency_s"]
                                                      else " (assumed)"))
    if options["budget"] and cost > options["budget"]:
        st.caption(f"The estimate (${cost:,.4f}) is over the budget: the run will stop before the end.")
    out["estimate"] = {"judge_calls": est["judge_calls"], "prompt_tokens": est["prompt_tokens"],
                       "completion_tokens": est["completion_tokens"], "tokenizer": est.get("tokenizer"), "usd": cost,
                       "by_metric": {m: {**v, "usd": price.cost(v["prompt_tokens"] * times, v["completion_tokens"] * times,
                                                                batch=options["batch"])}
                                     for m, v in (est.get("by_metric") or {}).items()}}
    return out


@st.fragment(run_every=0.5)
def _estimating(dataset_id: str, spec: RunSpec) -> None:
    """A line in place of the estimate while it is worked out; the page is drawn again once it is ready."""
    if loaders.estimate_ready(dataset_id, spec):
        st.rerun()
    st.caption("Working out the judge calls, tokens and cost of every row…")


ERRORS_SHOWN = 1000  # errored cells listed at once (the data layer reads no more than this, plus one)


def errors_panel(res: RunResults, run: dict) -> None:
    """Errored rows (1-based, as the dataset numbers them), and a retry that may use another judge. A run that
    failed as a whole (its judge unreachable, say) is explained here too: its rows have no error of their own."""
    errors = res.errors(ERRORS_SHOWN + 1)
    if run["status"] == "failed":
        st.warning(("The run failed before its rows were judged, so no row has an error of its own." if not errors
                    else "The run failed, besides the errored cells below.") + " Why: " + literal(run["error"] or "?")
                   + " To run it again with another judge: under the error above.", icon=":material/error:")
    if not errors:
        if run["status"] != "failed":
            st.success("No errored rows.")
        return
    more = len(errors) > ERRORS_SHOWN
    errors = errors[:ERRORS_SHOWN]
    st.caption(f"More than {ERRORS_SHOWN} errored cells; the first {ERRORS_SHOWN}:" if more
               else f"{count(len(errors), 'errored cell')} (row, metric):")
    table([{"row": res.dataset.row_no(i), "metric": m, "error": e} for i, m, e in errors])
    if run["status"] in ACTIVE and not worker_stopped(run):
        return
    _retry(run, "retry", "Retry with other judge settings", "Retry failed rows")


def rerun_panel(run: dict) -> bool:
    """Under a failed run's error: change its judge and run it again (its stored results kept, like a resume).

    Returns:
        whether the judge is being changed here (the caller's plain "Resume run" is then left out).
    """
    return _retry(run, "rerun", "Change the judge and run again", None)


def _retry(run: dict, prefix: str, toggle: str, label: str | None) -> bool:
    """A toggle to other judge settings (starting from the run's) and the button that runs the run again with them
    (``label`` None: only while the toggle is on). The settings become the run's judge; the one before is kept in
    its history. Returns whether the toggle is on."""
    spec_judge = (run["spec"] or {}).get("judge")
    judge, key = None, session_key()
    change = False
    if spec_judge and judged_metrics(run):
        current = JudgeConfig.from_dict(spec_judge)
        change = st.toggle(toggle, key=f"{prefix}.change",
                           help="The run records the judge it used before; each result keeps the model that scored it.")
        if change:
            judge, typed = judge_settings(prefix, current)
            if judge is None:
                return change
            # a key typed for the run's judge goes to no other address (or server judge): only one typed here
            same_place = (judge.provider, judge.judge_name, judge_url(judge)) == \
                (current.provider, current.judge_name, judge_url(current))
            key = typed if typed or not same_place else key
    if label is None and judge is None:
        return change
    label = (label or "Run again") + (" with these judge settings" if judge is not None else "")
    if st.button(label, key=prefix, type="primary" if label.startswith("Run again") else "secondary"):
        retry_failed(loaders.store(), run["id"], key, judge)  # the worker clears the errors once it holds the run
        loaders.forget_lists()
        st.rerun()
    return change
