"""Judge against people on one metric: agreement with intervals, and the run's rate corrected by reviews.

Everything here takes plain arrays (the judge's value and verdict per row) and a run's verdicts, so the
dashboard's columnar view and the command line give it the same numbers.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluators.core.agreement import agreement_numbers, krippendorff_alpha
from evaluators.core.inference import Corrected, more_reviews_for, ppi_mean
from evaluators.core.registry import MetricSpec
from evaluators.core.stats import wilson
from evaluators.core.scales import consensus, human_pass, ordinal, reports_defects, scale, snap

HALF_WIDTH = 0.05  # the precision a corrected rate is said to need more reviews for: +/- 5 points

# Landis and Koch (Biometrics 1977): the upper end of each band of kappa and its name
BANDS = ((0.20, "slight"), (0.40, "fair"), (0.60, "moderate"), (0.80, "substantial"), (1.0, "almost perfect"))


def kappa_verdict(kappa: float | None, low: float | None = None, high: float | None = None) -> str:
    """Judge-human agreement said in words from Cohen's kappa and its 95% interval, on Landis and Koch's
    bands; when the whole interval lies below 0, that the rate is not to be trusted.

    Args:
        kappa, low, high: kappa and its interval (None: not known).
    Returns:
        One sentence; "" when kappa is None or NaN (undefined).
    """
    if kappa is None or math.isnan(kappa):
        return ""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        low = high = None
    k = f"Cohen's κ {kappa:.2f}" + ("" if high is None else f" [{low:.2f}, {high:.2f}]")
    if high is not None and high < 0:
        return f"The judge disagrees with your reviewers more than chance ({k}): do not trust this metric's rate."
    if kappa < 0:
        return f"The judge agrees with your reviewers no better than chance ({k}, poor on Landis and Koch's " \
               "scale): its rate says little."
    band = next(name for top, name in BANDS if kappa <= top)
    return f"Judge and reviewers: {band} agreement ({k}, on Landis and Koch's scale)."


def _more_reviews(c: Corrected) -> str:
    """" (about 180 more would narrow it to ± 5 points)", or "" when it is that narrow already."""
    more = more_reviews_for(c, HALF_WIDTH)
    pts = f"± {100 * HALF_WIDTH:g} points"
    if more is None:
        return f" (reviewing every row would not narrow it to {pts})"
    return f" (about {more:,} more would narrow it to {pts})" if more else ""


@dataclass
class MetricAgreement:
    """One metric's judge-human agreement on its reviewed rows, and its corrected rate."""

    metric: str
    rate_name: str  # "pass_rate" or "defect_rate"
    reviewed_rows: int  # rows with a verdict and a judge value
    verdicts: int  # verdicts given (several reviewers on a row each count)
    kappa: tuple[float | None, float | None, float | None] = (None, None, None)  # value, ci95 low, high
    weighted_kappa: tuple[float | None, float | None, float | None] = (None, None, None)
    spearman: tuple[float | None, float | None, float | None] = (None, None, None)
    confusion_labels: list = field(default_factory=list)  # pass/fail: ["fail", "pass"]
    confusion: list = field(default_factory=list)  # [judge][human] counts
    alpha: float | None = None  # Krippendorff's alpha between reviewers
    alpha_rows: int = 0  # rows with two or more reviewers
    judged: float | None = None  # the judge's rate over every scored row
    corrected: Corrected | None = None
    human_only: tuple[float | None, float | None, float | None] = (None, None, None)  # Wilson, reviewed rows
    sample: str = "none"  # where the correction's rows come from: "queue <name>", "assumed random", "none"
    stale_rows: int = 0  # reviews made against an earlier judgment of the row

    @property
    def more_reviews(self) -> int | None:
        """Reviews beyond these (drawn as they were) that would bring the corrected rate's interval to
        ± 5 points: 0 when it is there, None with no corrected rate or when reviews cannot do it."""
        return None if self.corrected is None else more_reviews_for(self.corrected, HALF_WIDTH)

    @property
    def distrusted(self) -> bool:
        """Kappa's whole interval lies below 0: the judge disagrees with people more than chance."""
        return self.kappa[2] is not None and self.kappa[2] < 0

    def verdict(self) -> str:
        """The agreement in words (``kappa_verdict``); "" before any kappa."""
        return kappa_verdict(*self.kappa)

    def sentence(self) -> str:
        """The corrected rate and the agreement in words, e.g. "defect rate 4.1% as judged; 7.9% [5.2, 10.6]
        corrected by 120 reviews (about 180 more would narrow it to ± 5 points). Judge and reviewers: moderate
        agreement (Cohen's κ 0.55 [0.31, 0.79], on Landis and Koch's scale)."
        """
        verdict = self.verdict()
        return self._rate_sentence() + (f". {verdict}" if verdict else "")

    def _rate_sentence(self) -> str:
        what = self.rate_name.replace("_", " ")
        if self.judged is None:
            return f"{what}: no row judged yet"
        text = f"{what} {_pct(self.judged)} as judged"
        c = self.corrected
        if c is None:
            if not self.reviewed_rows:
                return text + "; no review yet"
            if self.sample != "none":
                return text + "; too few reviews in the sample to correct it yet (a stratified sample needs " \
                              "reviews of rows the judge passed and of rows it failed)"
            return text + "; the reviews are not a sample, so they do not correct it"
        return f"{text}; {_pct(c.corrected)} [{_pct(c.low, False)}, {_pct(c.high, False)}] corrected by " \
               f"{c.reviewed_rows} review{'s' if c.reviewed_rows != 1 else ''}{_more_reviews(c)}"


def _pct(v: float, sign: bool = True) -> str:
    return f"{100 * v:.1f}%" if sign else f"{100 * v:.1f}"


_consensus = consensus  # (review.io's name for it)


def metric_agreement(spec: MetricSpec, threshold: float, judge_values: np.ndarray, judge_verdicts: np.ndarray,
                     reviews: list[dict[str, Any]], sample_rows: set[int] | None = None,
                     strata: dict[int, str] | None = None, sample: str = "none",
                     stale: set[int] | None = None, seed: int = 0) -> MetricAgreement:
    """Agreement and the corrected rate of one metric.

    Args:
        judge_values, judge_verdicts: per row of the run, the judge's value (NaN none) and verdict (1/0/-1).
        reviews: the metric's verdicts (``row_idx``, ``reviewer``, ``value``); None values are skipped rows.
        sample_rows: reviewed rows that form a random sample (they correct the rate); None: none do.
        strata: for a stratified sample, row -> stratum (the judge's verdict it was drawn from).
        sample: says where ``sample_rows`` come from, for the page.
        stale: rows reviewed against an earlier judgment.
    """
    defect = reports_defects(spec)
    by_row: dict[int, list[tuple[str, float]]] = defaultdict(list)
    for r in reviews:
        if r["value"] is not None:
            by_row[int(r["row_idx"])].append((r["reviewer"], float(r["value"])))
    rows = sorted(i for i in by_row if 0 <= i < len(judge_values) and judge_verdicts[i] >= 0)
    out = MetricAgreement(spec.name, "defect_rate" if defect else "pass_rate", len(rows),
                          sum(len(by_row[i]) for i in rows), stale_rows=len(set(rows) & (stale or set())))
    scored = judge_verdicts >= 0
    if scored.any():
        rate = float((judge_verdicts[scored] == 1).mean())
        out.judged = 1 - rate if defect else rate
    _reviewer_alpha(spec, by_row, out)
    if not rows:
        return out
    idx = np.array(rows)
    jv = np.array([snap(spec, float(v)) for v in judge_values[idx]])
    hv = np.array([_consensus(spec, [v for _, v in by_row[i]]) for i in rows])
    jp = judge_verdicts[idx].astype(int)
    hp = np.array([int(human_pass(spec, v, threshold)) for v in hv])
    _agreement_numbers(spec, out, jv, hv, jp, hp, seed)
    # the human pass share per row (several reviewers may split) against the judge's
    hfrac = np.array([np.mean([human_pass(spec, v, threshold) for _, v in by_row[i]]) for i in rows])
    sign = (lambda x: 1 - x) if defect else (lambda x: x)
    k = int(round(float(sign(hfrac).sum())))
    out.human_only = wilson(k, len(rows))
    use = [j for j, i in enumerate(rows) if sample_rows is not None and i in sample_rows]
    if use:
        all_rows = np.flatnonzero(scored)
        all_strata = None if strata is None else [strata.get(int(i), "-") for i in all_rows]
        rev_strata = None if strata is None else [strata.get(rows[j], "-") for j in use]
        out.corrected = ppi_mean(sign((judge_verdicts[all_rows] == 1).astype(float)), sign(jp[use].astype(float)),
                                 sign(hfrac[use]), strata_all=all_strata, strata_reviewed=rev_strata)
        out.sample = sample  # (corrected stays None while a stratum has no review)
    return out


def _agreement_numbers(spec: MetricSpec, out: MetricAgreement, jv: np.ndarray, hv: np.ndarray, jp: np.ndarray,
                       hp: np.ndarray, seed: int) -> None:
    got = agreement_numbers(jv, hv, jp, hp, [c.value for c in scale(spec)] if ordinal(spec) else None, seed=seed)
    out.kappa, out.weighted_kappa, out.spearman = got["kappa"], got["weighted_kappa"], got["spearman"]
    out.confusion_labels, out.confusion = ["fail", "pass"], got["confusion"]


def _reviewer_alpha(spec: MetricSpec, by_row: dict[int, list[tuple[str, float]]], out: MetricAgreement) -> None:
    """Krippendorff's alpha between reviewers, on rows two or more of them answered."""
    multi = {i: v for i, v in by_row.items() if len({who for who, _ in v}) >= 2}
    out.alpha_rows = len(multi)
    if not multi:
        return
    names = sorted({who for v in multi.values() for who, _ in v})
    cols = sorted(multi)
    m = np.full((len(names), len(cols)), np.nan)
    for c, i in enumerate(cols):
        for who, v in multi[i]:
            m[names.index(who), c] = v
    out.alpha = krippendorff_alpha(m, "ordinal" if ordinal(spec) else "nominal", [c.value for c in scale(spec)])


def flat(spec: MetricSpec, a: MetricAgreement) -> dict[str, Any]:
    """``metrics.json`` keys of one reviewed metric: ``<metric>.human_reviewed_rows``, ``.human_kappa`` and
    ``.human_weighted_kappa`` (each with ``_ci95_low`` / ``_ci95_high``), and ``.<K>_pass_rate_corrected`` or
    ``.<K>_defect_rate_corrected`` with its interval."""
    n, p = spec.name, spec.prefix
    out: dict[str, Any] = {f"{n}.human_reviewed_rows": a.reviewed_rows}
    for key, (v, lo, hi) in (("human_kappa", a.kappa), ("human_weighted_kappa", a.weighted_kappa)):
        out[f"{n}.{key}"], out[f"{n}.{key}_ci95_low"], out[f"{n}.{key}_ci95_high"] = v, lo, hi
    c = a.corrected
    stem = f"{n}.{p}_{a.rate_name}_corrected"
    out[stem] = None if c is None else c.corrected
    out[f"{stem}_ci95_low"], out[f"{stem}_ci95_high"] = (None, None) if c is None else (c.low, c.high)
    return out
