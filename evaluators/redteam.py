"""Red-team scans from Python (issue 33), as the SDK's ``RedTeam`` is used from a notebook::

    from evaluators.redteam import scan, diff_scans, read_attacks
    res = scan(target, judge, risk_categories=["violence"], strategies=["easy", "crescendo"], attacker=attacker,
               out="scan/")
    res.scorecard["risk_category_summary"]

The Python surface beside :mod:`evaluators.api`: it assembles the red-team suite (:mod:`evaluators.suites.redteam`)
and adds nothing of its own.
"""
from evaluators.suites.redteam.diff import diff_scans, read_attacks
from evaluators.suites.redteam.objectives import RISK_CATEGORIES, load_objectives
from evaluators.suites.redteam.scan import ScanResult, resolve_strategies, scan
from evaluators.suites.redteam.strategies import apply

__all__ = ["scan", "ScanResult", "resolve_strategies", "diff_scans", "read_attacks", "load_objectives", "apply",
           "RISK_CATEGORIES"]
