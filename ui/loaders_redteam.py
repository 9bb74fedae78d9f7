"""The Red team page's reads (issue 33), beside ui/loaders.py (at its size limit): the scans under the store's home,
a scan's state (read again every second while the page follows it) and a finished scan's scorecard and attacks
(cached by the scan and the scorecard's modification time: a scan resumed into its folder is read again)."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from evaluators.suites.redteam import background
from evaluators.suites.redteam.multiturn import MAX_BACKTRACKS, MAX_TURNS
from evaluators.suites.redteam.scan import DEFAULT_THRESHOLD
from ui.loaders import store  # noqa: F401 — (the one store: a scan started here writes to it)


@st.cache_data(ttl=2, show_spinner=False)
def _scans(home: str) -> list[str]:
    return background.scans()


def scans(wanted: str | None = None) -> list[str]:
    """The scans' folder names, newest first; read again at once when the URL names one the cached list lacks."""
    home = str(background.scans_home())
    out = _scans(home)
    if wanted and wanted not in out:
        _scans.clear()
        out = _scans(home)
    return out


def state(name: str) -> dict:
    """A scan's state (``evaluators.suites.redteam.background.state``): not cached, it is what changes."""
    return background.state(name)


@st.cache_data(max_entries=8, show_spinner=False)
def _read(home: str, name: str, mtime: float) -> tuple[dict, list[dict]]:
    return background.read(name)


def scan(name: str) -> tuple[dict, list[dict]]:
    """A finished scan's scorecard and attacks."""
    path = background.folder(name) / "scorecard.json"
    return _read(str(background.scans_home()), name, path.stat().st_mtime)


def forget() -> None:
    """The scan list read again (a scan was just started)."""
    _scans.clear()


# ------------------------------------------------------------ reviews of a scan's verdicts
def reviewed(card: dict) -> list[dict]:
    """Per category of a scan: the store's run that judged its attacks, the judge's ASR and the ASR corrected by
    that run's reviews, read as the Results page reads any run's rate (``ui.loaders.results`` at the scan's
    threshold, then ``ui.loaders.agreement``: ``evaluators.review.agreement``, one implementation). An attack
    succeeded when its severity is above the category's threshold: the run's defect at that threshold.

    Returns:
        one dict per category: ``risk_category``, ``run_id``, ``threshold`` (the scan's), ``run_threshold`` (the run's
        own; None: no such run in this store), ``agreement`` (its ``MetricAgreement``, or None).
    """
    from ui import loaders

    limits = card["parameters"]["attack_success_thresholds"]
    out = []
    for cat, rid in (card.get("runs") or {}).items():
        if cat not in limits:  # (over_refusal, understanding: label runs of their own)
            continue
        run = loaders.run(rid)
        rec = {"risk_category": cat, "run_id": rid, "threshold": float(limits[cat]), "run_threshold": None,
               "agreement": None}
        if run is not None:
            rec["run_threshold"] = (run["spec"].get("thresholds") or {}).get(cat)
            res = loaders.results(run, {cat: float(limits[cat])})
            rec["agreement"] = loaders.agreement(run, res).get(cat)
        out.append(rec)
    return out


# ------------------------------------------------------------ two scans compared
def _config(settings: dict) -> tuple:
    """What makes two scans comparable, attack by attack: categories, strategies, objectives (and their file's
    content), seed, thresholds (the default where none was given) and, for conversations, the attacker model and
    the turn limits; the target (its build) is what may differ."""
    cats = list(settings.get("risk_categories") or [])
    limits = {c: float((settings.get("thresholds") or {}).get(c, DEFAULT_THRESHOLD)) for c in cats}
    talks = (settings.get("attacker_model"), settings.get("max_turns", MAX_TURNS),
             settings.get("max_backtracks", MAX_BACKTRACKS))
    path = settings.get("objectives_file")
    try:
        content = Path(path).read_bytes() if path else b""
    except OSError:
        content = object()  # (gone: comparable with no other scan)
    return (tuple(cats), tuple(settings.get("strategies") or []), settings.get("objectives"), settings.get("seed"),
            tuple(sorted(limits.items())), content, talks)


def comparable(name: str) -> list[str]:
    """The completed scans started before ``name`` with the same configuration, newest first."""
    mine = _config(state(name)["settings"])
    out = []
    for other in scans():
        if other >= name:
            continue
        s = state(other)
        if s["status"] == "completed" and _config(s["settings"]) == mine:
            out.append(other)
    return out


@st.cache_data(max_entries=8, show_spinner=False)
def _diff(home: str, before: str, after: str, mtimes: tuple) -> dict:
    from evaluators.suites.redteam.diff import diff_scans, read_attacks

    return diff_scans(read_attacks(background.folder(before)), read_attacks(background.folder(after)))


def diff(before: str, after: str) -> dict:
    """``evaluators.suites.redteam.diff.diff_scans`` of two scans' attacks (as ``redteam-diff`` computes it)."""
    mtimes = tuple((background.folder(n) / "attacks.jsonl").stat().st_mtime for n in (before, after))
    return _diff(str(background.scans_home()), before, after, mtimes)
