"""The Red team page's reads (issue 33), beside ui/loaders.py (at its size limit): the scans under the store's home,
a scan's state (read again every second while the page follows it) and a finished scan's scorecard and attacks
(cached by the scan and the scorecard's modification time: a scan resumed into its folder is read again)."""
from __future__ import annotations

import streamlit as st

from evaluators.suites.redteam import background
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

