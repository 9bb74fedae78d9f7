"""The corrected rate's 95% interval beside the PPI authors' package: coverage and mean width per scenario.

    python bench/ppi_coverage.py [--reps 4000] [--ppipp-reps 2000] [--only 0.5,poor,30 ...] [--quick]

Scenarios (tests/ppi_sim.py says how each run is drawn): true defect rates 3%, 10%, 30%, 50%; a good judge
(flags 90% of defects and 3% of clean rows), a fair one (75%, 10%) and a poor one (60%, 25%); 30, 60, 150
and 300 reviewed rows of 3,000 judged. For each: coverage of the true rate and mean width of our interval
(``evaluators.core.inference.ppi_mean``), of ``ppi_py.ppi_mean_ci`` classic (lambda = 1) and of its PPI++
(lambda tuned), on the same seeded runs; PPI++ on the first ``--ppipp-reps`` of them (it is 4x slower).
Targets (issue 35): ours covers >= 93% everywhere, and its width is within 5% of classic PPI's wherever
classic PPI covers (>= 93%). ``--only``: these scenarios (rate,judge,reviews); ``--ppipp-reps 0`` leaves
PPI++ out; ``--quick``: 500 runs a scenario.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.ppi_sim import JUDGES, Scenario, simulate  # noqa: E402

RATES, REVIEWS = (0.03, 0.10, 0.30, 0.50), (30, 60, 150, 300)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--ppipp-reps", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*", default=None, help="rate,judge,reviews, e.g. 0.5,poor,30")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    reps, pp_reps = (500, 500) if a.quick else (a.reps, a.ppipp_reps)
    print(f"{reps} runs a scenario (PPI++: the first {pp_reps}), {a.rows:,} judged rows, seed {a.seed}\n")
    print("| defects | judge | reviews | ours: coverage, width | classic PPI | PPI++ | ours / classic width "
          "| no review disagrees: share of runs, classic's coverage, ours | target |")
    print("|---|---|---|---|---|---|---|---|---|")
    t0, misses = time.perf_counter(), []
    grid = [(r, j, n) for r in RATES for j in JUDGES for n in REVIEWS] if a.only is None else \
        [(float(r), j, int(n)) for r, j, n in (o.split(",") for o in a.only)]
    for rate, judge, n in grid:
        sc = Scenario(rate, judge, n, a.rows)
        line, ok = row(sc, reps, pp_reps, a.seed)
        print(line, flush=True)
        if not ok:
            misses.append(str(sc))
    print(f"\ntargets missed in {len(misses)} of {len(grid)} scenarios"
          + (": " + "; ".join(misses) if misses else "") + f" ({time.perf_counter() - t0:.0f} s)")


def row(sc: Scenario, reps: int, pp_reps: int, seed: int) -> tuple[str, bool]:
    """One scenario's line of the table, and whether ours meets both targets there."""
    got = simulate(sc, reps, seed, ("ours", "ppi"))
    pp = simulate(sc, pp_reps, seed, ("ppi++",))["ppi++"] if pp_reps else None
    ours, ppi = got["ours"], got["ppi"]
    ratio = ours.mean_width / ppi.mean_width
    ok = ours.coverage >= 0.93 and (ppi.coverage < 0.93 or ratio <= 1.05)
    zero, zero_ours = got["ppi | none disagree"], got["ours | none disagree"]
    none = f"{zero.reps / reps:.0%}" + (f", {zero.coverage:.3f}, {zero_ours.coverage:.3f}" if zero.reps else "")
    pp_text = f"{pp.coverage:.3f}, {pp.mean_width:.4f}" if pp else "–"
    return (f"| {100 * sc.rate:g}% | {sc.judge} | {sc.reviews} | {ours.coverage:.3f}, {ours.mean_width:.4f} "
            f"| {ppi.coverage:.3f}, {ppi.mean_width:.4f} | {pp_text} | {ratio:.2f} | {none} "
            f"| {'met' if ok else '**missed**'} |"), ok


if __name__ == "__main__":
    main()
