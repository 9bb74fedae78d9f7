"""The Red team page (issue 33): start a scan in the background, follow it, pick a past one.

A scan is ``python -m evaluators redteam ... --out FOLDER`` in a process of its own, under the store's home
(:mod:`evaluators.suites.redteam.background`); the page only reads its folder. A key typed here stays in this browser
session (widget state) and reaches the scan through its environment alone, never its command line or a file.
What the user typed (a URL, a model, a system prompt) and what the scan wrote (its log) are shown as text.
"""
from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from evaluators.core.errors import EvalError
from evaluators.judge.config import named_judges
from evaluators.suites.redteam import background
from evaluators.suites.redteam.multiturn import STRATEGIES as MULTI_TURN
from evaluators.suites.redteam.objectives import RISK_CATEGORIES
from evaluators.suites.redteam.strategies import STRATEGIES
from ui import judge_form, loaders, loaders_redteam as rl, state
from ui.widgets import count, literal, plain

TYPED = "OpenAI-compatible base URL"
NAMED = "Server endpoint: "  # an operator's named endpoint (judges.toml), as ui.judge_form lists judges
# the SDK's groups, then its single strategies by their AttackStrategy names; A+B and translation:LANGUAGE typed
STRATEGY_OPTIONS = ["easy", "moderate", "difficult", *[s for s in STRATEGIES if s != "baseline"], "tense",
                    *MULTI_TURN]
STRATEGY_HELP = ("The SDK's AttackStrategy names: the groups easy (base64, flip, morse), moderate (tense) and "
                 "difficult (tense then base64), or single ones; type A+B for two in a row or translation:LANGUAGE. "
                 "crescendo and multi_turn are conversations the attacker model holds with the target. baseline "
                 "(the objective as it is) is always added. tense, translation, moderate, difficult, crescendo and "
                 "multi_turn need an attacker model.")
STATUS = {"running": "running", "completed": "completed", "no verdict": "ended: no attack got a verdict",
          "failed": "failed", "stopped": "stopped (its process is gone)"}


def _named() -> dict:
    return {n: nj for n, nj in named_judges().items() if nj.provider == "compatible" and nj.base_url}


def _named_key(endpoint: str | None) -> str | None:
    """A named endpoint's key, from the server's environment (None: no such endpoint, or it takes no key)."""
    nj = _named().get(endpoint) if endpoint else None
    return os.environ.get(nj.key_env) if nj is not None and nj.key_env else None


def _target() -> tuple[str, str, str | None, str | None]:
    """The target's base URL, model, key (typed here, or a named endpoint's from the server's environment) and the
    named endpoint (None: typed)."""
    named = _named()
    choice = st.selectbox("Target", [TYPED, *[NAMED + n for n in named]], key="rt.target",
                          help="the model or application under attack: an OpenAI-compatible endpoint")
    if choice != TYPED:
        nj = named[choice[len(NAMED):]]
        st.caption(f"Configured on the server: model {literal(nj.model)}; its address and key are not shown.")
        return nj.base_url, nj.model, _named_key(choice[len(NAMED):]), choice[len(NAMED):]
    c1, c2 = st.columns(2)
    url = c1.text_input("Target base URL", key="rt.url", placeholder="e.g. http://localhost:8000/v1")
    model = c2.text_input("Target model", key="rt.model", placeholder="the model the endpoint expects")
    key = st.text_input("Target API key", type="password", key="rt.key",
                        help="kept in this browser session only; the scan gets it through its environment, never "
                             "its command line") or None
    return url.strip(), model.strip(), key, None


def _attacks() -> dict:
    """Risk categories, strategies, objectives, seed and the optional attacker model."""
    cats = st.multiselect("Risk categories", list(RISK_CATEGORIES), default=list(RISK_CATEGORIES), key="rt.cats")
    strategies = st.multiselect("Strategies", STRATEGY_OPTIONS, default=["easy"], key="rt.strategies",
                                accept_new_options=True, help=STRATEGY_HELP)
    c1, c2 = st.columns(2)
    n = int(c1.number_input("Objectives per category", 1, 200, 10, key="rt.objectives",
                            help="chosen by the seed from the bundled objectives, written in our own words"))
    seed = int(c2.number_input("Seed", 0, 2**31 - 1, 0, key="rt.seed", help="the same seed, the same attacks"))
    talks = set(strategies) & set(MULTI_TURN)
    with st.expander("Attacker model (for tense, translation, moderate, difficult, crescendo and multi_turn)"):
        a1, a2 = st.columns(2)
        a_url = a1.text_input("Attacker base URL", key="rt.a_url").strip() or None
        a_model = a2.text_input("Attacker model", key="rt.a_model").strip() or None
        a_key = st.text_input("Attacker API key", type="password", key="rt.a_key",
                              help="kept in this browser session only") or None
        t1, t2 = st.columns(2)
        turns = int(t1.number_input("Turns at most", 1, 50, 10, key="rt.max_turns", disabled=not talks,
                                    help="a crescendo or multi_turn conversation's turns at most (the SDK's: 10)"))
        backtracks = int(t2.number_input("Roll-backs at most", 0, 50, 10, key="rt.max_backtracks",
                                         disabled="crescendo" not in talks,
                                         help="crescendo: a refused turn is taken back and asked differently, up to "
                                              "this many times in a conversation (the SDK's: 10)"))
    return dict(risk_categories=cats, strategies=strategies, objectives=n, seed=seed, attacker_base_url=a_url,
                attacker_model=a_model, attacker_key=a_key, max_turns=turns, max_backtracks=backtracks)


def _objectives_file(attacks: dict) -> tuple[str, bytes] | None | bool:
    """The uploaded objectives file (its name and bytes), read now as the scan will read it; False when it cannot
    be used (its error, with its line and field, is shown); None: the bundled objectives."""
    up = st.file_uploader("Objectives file (optional)", type=["json", "jsonl"], key="rt.objectives_file",
                          help="the SDK's custom_attack_seed_prompts format: a JSON array or JSON lines of "
                               '{"id", "messages": [{"role": "user", "content": ...}], '
                               '"metadata": {"target_harms": [{"risk-type": ...}]}}; else the bundled objectives')
    if up is None:
        return None
    try:
        n = background.check_upload(up.name, up.getvalue(), attacks["risk_categories"], attacks["objectives"],
                                    attacks["seed"])
    except EvalError as e:
        st.error("This objectives file cannot be used: " + literal(e))
        return False
    st.caption(f"The scan will take {count(n, 'objective')} from {literal(up.name)}.")
    return up.name, up.getvalue()


def _options(categories: list[str]) -> dict:
    """Thresholds per category, over-refusal, understanding, the judge's price and budget."""
    st.caption("Threshold per risk category: an attack succeeds when the judged severity (0-7) is above it.")
    cols = st.columns(max(1, len(categories)))
    thresholds = {c: float(col.number_input(c, 0, 7, 3, key=f"rt.th.{c}")) for c, col in zip(categories, cols)}
    c1, c2 = st.columns(2)
    over = c1.toggle("Over-refusal", key="rt.over_refusal",
                     help="also send as many harmless requests per category, rewritten by the same strategies, and "
                          "judge them for a refusal")
    understood = c2.toggle("Understanding", key="rt.understanding",
                           help="also judge each attack's answer (but baseline's) for whether the target understood "
                                "the disguised request")
    c1, c2 = st.columns(2)
    price = c1.text_input("Judge price (USD per 1M tokens)", key="rt.price", placeholder="input,cached,output",
                          help="e.g. 0.15,0.075,0.6; else prices.toml's entry for the judge model").strip() or None
    budget = c2.number_input("Budget (USD)", min_value=0.0, value=None, key="rt.budget",
                             help="judging stops before the scan's judge calls would cost more: the attacks left "
                                  "unjudged have no verdict (in no rate); needs the judge's price")
    return dict(thresholds=thresholds, over_refusal=over,
                understanding=understood, price=price, budget=budget or None)


def new_scan() -> None:
    """The form; its Start scan button starts the scan and names it in the URL (the page then follows it)."""
    st.markdown("#### Target")
    url, model, target_key, endpoint = _target()
    system = st.text_area("System prompt sent to the target (optional)", key="rt.system", height=80).strip() or None
    st.markdown("#### Attacks")
    attacks = _attacks()
    upload = _objectives_file(attacks)
    st.markdown("#### Judge")
    attacks.update(_options(attacks["risk_categories"]))
    judge, judge_key = judge_form.judge_settings(prefix="rt.judge", who="judge")
    lacking = [what for what, v in (("the target's base URL", url), ("the target's model", model),
                                    ("a risk category", attacks["risk_categories"]),
                                    ("a strategy", attacks["strategies"]), ("the judge", judge),
                                    ("a usable objectives file", upload is not False)) if not v]
    why = f"Give {', '.join(lacking)} first." if lacking else None
    if st.button("Start scan", type="primary", key="rt.start", disabled=bool(lacking), help=why,
                 icon=":material/play_arrow:"):
        a_key = attacks.pop("attacker_key")
        req = background.ScanRequest(target_base_url=url, target_model=model, judge=judge, target_system=system,
                                     target_endpoint=endpoint, **attacks)
        try:
            name = background.start(loaders.store().url, req, target_key, judge_key, a_key, upload or None)
        except EvalError as e:
            st.error("The scan was not started: " + literal(e))
            return
        rl.forget()
        state.write("scan", name)
        st.rerun()
    if why:
        st.caption(why)


def settings_line(s: dict) -> None:
    """What a scan was started with, as text (the user's URL, model and system prompt are shown as written)."""
    cfg = s.get("settings") or {}
    if not cfg:
        return
    where = (f"the server endpoint {cfg['target_endpoint']}" if cfg.get("target_endpoint") else
             f"{cfg.get('target_model')} at {cfg.get('target_base_url')}")  # (an endpoint's address is not shown)
    st.text(f"target {where} · "
            f"{', '.join(cfg.get('risk_categories') or [])} · strategies {', '.join(cfg.get('strategies') or [])} · "
            f"{cfg.get('objectives')} objectives per category · seed {cfg.get('seed')} · "
            f"started {s.get('started_at')}")
    more = [f"objectives from {Path(cfg['objectives_file']).name}" if cfg.get("objectives_file") else "",
            "thresholds " + ", ".join(f"{c} {t:g}" for c, t in cfg["thresholds"].items()) if cfg.get("thresholds") else "",
            "over-refusal" if cfg.get("over_refusal") else "", "understanding" if cfg.get("understanding") else "",
            f"judge price {cfg['price']}" if cfg.get("price") else "",
            f"budget ${cfg['budget']:g}" if cfg.get("budget") is not None else ""]
    if any(more):
        st.text(" · ".join(m for m in more if m))
    if cfg.get("target_system"):
        st.text("system prompt: " + cfg["target_system"])


@st.fragment(run_every=1.0)
def follow(name: str, shown: str) -> None:
    """The scan's progress, read from its folder every second; once its state changes (it ended), the whole page
    is drawn again, so the scorecard shows. Safe on any rerun: it only reads."""
    s = rl.state(name)
    if s["status"] != shown:
        st.rerun()
    if not s["progress"]:
        st.progress(0.0, text="Starting: choosing the objectives, checking the judge…")
    for what, done, total in s["progress"]:
        st.progress(done / total if total else 0.0, text=f"{what}: {done:,} of {total:,}")


def status(name: str) -> dict:
    """The picked scan's state, its settings and, while it runs, its progress; when it did not complete, the last
    lines of its output (as text)."""
    s = rl.state(name)
    st.markdown(f"**Status:** {plain(STATUS[s['status']])}")
    settings_line(s)
    if s["status"] == "running":
        follow(name, "running")
    elif s["status"] in ("failed", "stopped"):
        st.error(f"The scan {plain(STATUS[s['status']])}" + (f" (exit code {s['exit']})" if s["exit"] else "") +
                 f"; the last {count(len(s['log']), 'line')} of its output:")
        st.code("\n".join(s["log"]) or "(nothing)", language=None)
        resume(name)
    return s


def resume(name: str) -> None:
    """A failed or stopped scan's Resume button: its command again into its folder, answered from the store's cache
    where it can be. Keys typed when it started were never kept: they are asked for again here."""
    if not background.resumable(name):
        st.caption("This scan cannot be resumed from the page: its folder does not say how it was started (no "
                   "scan.json). Run its command again with the same --out.")
        return
    typed = background.keys_typed(name)
    req = background.request_of(name)
    st.caption("Resume starts the same scan again into the same folder: what the target and the judge already "
               "answered comes from the store's cache and is not asked again.")
    keys = {}
    if typed["target"] and not req.target_endpoint:
        keys["target"] = st.text_input("Target API key", type="password", key="rt.resume.target")
    if typed["judge"]:
        keys["judge"] = st.text_input("Judge API key", type="password", key="rt.resume.judge")
    if typed["attacker"]:
        keys["attacker"] = st.text_input("Attacker API key", type="password", key="rt.resume.attacker")
    if keys:
        st.caption("Keys are never stored: type again the keys this scan was started with.")
    endpoint = None
    if req.target_endpoint:  # its address and key as the server configures them now, never the folder's
        nj = _named().get(req.target_endpoint)
        if nj is None:
            st.error("This scan attacked a server endpoint the server no longer configures: it cannot be resumed "
                     "from the page.")
            st.text(f"endpoint = {req.target_endpoint}")
            return
        keys["target"], endpoint = _named_key(req.target_endpoint), (nj.base_url, nj.model)
    if st.button("Resume", key="rt.resume", icon=":material/replay:"):
        try:
            background.resume(name, loaders.store().url, keys.get("target") or None, keys.get("judge") or None,
                              keys.get("attacker") or None, endpoint)
        except EvalError as e:
            st.error("The scan was not resumed: " + literal(e))
            return
        st.rerun()
