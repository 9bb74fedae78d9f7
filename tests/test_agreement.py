"""Agreement and inference statistics against their reference implementations (scikit-learn, krippendorff,
SciPy), published worked examples and hand computations, on hand-made and Hypothesis-generated data."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluators.core import agreement as ag
from evaluators.core import inference as inf
from tests.ppi_sim import ppi_by_hand

pytestmark = pytest.mark.no_store  # opens no store: deselected in the PostgreSQL pass

sklearn_metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn (requirements-dev.txt) gives the reference kappas")
krippendorff = pytest.importorskip("krippendorff", reason="the krippendorff package gives the reference alpha")
scipy_stats = pytest.importorskip("scipy.stats", reason="SciPy gives the reference rho, t and binomial tests")

SCALE = [1, 2, 3, 4, 5]
pairs = st.integers(min_value=2, max_value=60).flatmap(
    lambda n: st.tuples(st.lists(st.sampled_from(SCALE), min_size=n, max_size=n),
                        st.lists(st.sampled_from(SCALE), min_size=n, max_size=n)))


@settings(max_examples=150, deadline=None)
@given(pairs)
def test_cohen_kappa_equals_scikit_learn_plain_and_quadratic(ab):
    a, b = ab
    for weights in (None, "quadratic", "linear"):
        ours = ag.cohen_kappa(a, b, labels=SCALE, weights=weights)
        with np.errstate(all="ignore"):
            ref = sklearn_metrics.cohen_kappa_score(a, b, labels=SCALE, weights=weights)
        if ours is None:
            assert math.isnan(ref) or ref == pytest.approx(0.0, abs=1e-12) and len(set(a) | set(b)) == 1
        else:
            assert ours == pytest.approx(ref, abs=1e-12)


def test_cohen_kappa_hand_computed():
    # 2x2: judge x human = [[20, 5], [10, 15]]: po = 35/50, pe = (25*30 + 25*20)/2500 = 0.5, kappa = 0.4
    judge = [0] * 25 + [1] * 25
    human = [0] * 20 + [1] * 5 + [0] * 10 + [1] * 15
    assert ag.cohen_kappa(judge, human) == pytest.approx(0.4)
    labels, m = ag.confusion(judge, human, [0, 1])
    assert m.tolist() == [[20, 5], [10, 15]]
    assert ag.cohen_kappa([3, 3, 3], [3, 3, 3]) is None  # nothing to agree on beyond chance


@settings(max_examples=150, deadline=None)
@given(pairs)
def test_spearman_equals_scipy(ab):
    a, b = ab
    ref = scipy_stats.spearmanr(a, b).statistic
    ours = ag.spearman(a, b)
    if ours is None:
        assert len(set(a)) == 1 or len(set(b)) == 1
    else:
        assert ours == pytest.approx(ref, abs=1e-12)


reliability = st.integers(min_value=2, max_value=4).flatmap(
    lambda r: st.lists(st.lists(st.one_of(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7]), st.none()), min_size=r, max_size=r),
                       min_size=2, max_size=40))


@settings(max_examples=150, deadline=None)
@given(reliability)
def test_krippendorff_alpha_equals_the_package(units):
    data = np.array([[np.nan if v is None else v for v in unit] for unit in units], dtype=float).T
    pairable = (~np.isnan(data)).sum(axis=0) >= 2
    values = np.unique(data[:, pairable][~np.isnan(data[:, pairable])]) if pairable.any() else []
    for level in ("nominal", "ordinal", "interval"):
        ours = ag.krippendorff_alpha(data, level, domain=range(8))
        if not pairable.any() or len(values) < 2 and level != "nominal":
            continue
        with np.errstate(all="ignore"):
            try:
                ref = krippendorff.alpha(reliability_data=data, level_of_measurement=level, value_domain=list(range(8)))
            except ValueError:
                continue
        if ours is None:
            assert math.isnan(ref)
        else:
            assert ours == pytest.approx(ref, abs=1e-9)


def test_krippendorff_alpha_published_example():
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the 4 coders x 12 units example:
    # nominal alpha = 0.743
    nan = np.nan
    data = [[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
            [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]]
    assert round(ag.krippendorff_alpha(data, "nominal"), 3) == 0.743
    assert round(ag.krippendorff_alpha(data, "interval"), 3) == 0.849


def test_fleiss_kappa_published_example():
    # Fleiss' kappa's worked example (Wikipedia, after Fleiss 1971): 10 subjects, 14 raters, 5 categories
    counts = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
              [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    assert round(ag.fleiss_kappa(counts), 3) == 0.210
    with pytest.raises(ValueError, match="same number"):
        ag.fleiss_kappa([[1, 1], [2, 1]])


def test_bootstrap_interval_is_seeded_and_clusters_widen_it():
    rng = np.random.default_rng(3)
    x = rng.normal(size=40)
    mean = lambda idx: float(x[idx].mean())  # noqa: E731
    lo, hi = ag.bootstrap_ci(mean, 40, 2000, seed=5)
    assert (lo, hi) == ag.bootstrap_ci(mean, 40, 2000, seed=5)
    assert lo < x.mean() < hi
    # the normal-theory 95% interval of a mean (SciPy's t) is what the percentile bootstrap approaches
    t = scipy_stats.t.ppf(0.975, 39) * x.std(ddof=1) / math.sqrt(40)
    assert hi - lo == pytest.approx(2 * t, rel=0.2)
    # ten conversations of four identical turns: resampling turns alone would pretend 40 independent rows
    y = np.repeat(rng.normal(size=10), 4)
    flat = ag.bootstrap_ci(lambda idx: float(y[idx].mean()), 40, 2000, seed=5)
    grouped = ag.bootstrap_ci(lambda idx: float(y[idx].mean()), 40, 2000, seed=5, clusters=np.repeat(range(10), 4))
    assert (grouped[1] - grouped[0]) > 1.6 * (flat[1] - flat[0])


def test_mcnemar_exact_equals_scipy_binomial_test():
    for b, c in [(3, 11), (0, 5), (7, 7), (20, 41), (1, 0), (150, 190)]:
        ref = scipy_stats.binomtest(min(b, c), b + c, 0.5).pvalue
        assert inf.mcnemar_exact(b, c) == pytest.approx(ref, rel=1e-9)
    assert inf.mcnemar_exact(0, 0) == 1.0


def test_rows_for_power_hand_computed_and_simulated():
    # Connor (1987): p10 = 0.10, p01 = 0.05 -> (1.96 sqrt(.15) + 0.8416 sqrt(.15 - .0025))^2 / .0025 = 468.6
    assert inf.rows_for_power_mcnemar(0.10, 0.05) == 469
    # and McNemar's exact test at that many rows does reject about 80% of the time (SciPy's binomial test)
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(400):
        cells = rng.multinomial(469, [0.10, 0.05, 0.85])
        hits += scipy_stats.binomtest(int(cells[1]), int(cells[0] + cells[1]), 0.5).pvalue < 0.05
    assert 0.72 <= hits / 400 <= 0.88
    # paired means: ((1.96 + 0.8416) * sd / d)^2 with sd 1, d 0.25 -> 125.6
    assert inf.rows_for_power_paired(0.25, 1.0) == 126


def test_ppi_mean_equals_its_formula():
    rng = np.random.default_rng(2)
    y = (rng.random(400) < 0.2).astype(float)
    f = np.where(y == 1, rng.random(400) > 0.4, rng.random(400) < 0.05).astype(float)
    idx = rng.choice(400, 60, replace=False)
    c = inf.ppi_mean(f, f[idx], y[idx])
    assert (c.corrected, c.low, c.high) == pytest.approx(ppi_by_hand(f, idx, y[idx]), abs=1e-12)
    assert c.judged == pytest.approx(f.mean())
    # every row reviewed: the correction is the people's own rate
    assert inf.ppi_mean(f, f, y).corrected == pytest.approx(y.mean())


@pytest.mark.parametrize("design", ["random", "stratified"])
def test_corrected_rate_interval_covers_the_true_rate(design):
    """1,000 simulated runs: 2,000 rows, a true defect rate of 8%, a judge that misses half the defects and
    flags 2% of clean rows, 150 reviews. The corrected rate's 95% interval covers the true rate >= 93%."""
    rng = np.random.default_rng(2026)
    p, n_rows, n_rev, covered = 0.08, 2000, 150, 0
    for _ in range(1000):
        y = (rng.random(n_rows) < p).astype(float)
        f = np.where(y == 1, rng.random(n_rows) > 0.5, rng.random(n_rows) < 0.02).astype(float)
        if design == "random":
            idx = rng.choice(n_rows, n_rev, replace=False)
            c = inf.ppi_mean(f, f[idx], y[idx])
        else:  # half the reviews from the rows the judge flagged, half from the rest
            flagged, rest = np.flatnonzero(f == 1), np.flatnonzero(f == 0)
            k = min(len(flagged), n_rev // 2)
            idx = np.r_[rng.choice(flagged, k, replace=False), rng.choice(rest, n_rev - k, replace=False)]
            c = inf.ppi_mean(f, f[idx], y[idx], strata_all=f, strata_reviewed=f[idx])
        covered += c.low <= p <= c.high
    assert covered / 1000 >= 0.93
    # and the judge's own rate, uncorrected, is far off: it is why the correction exists
    assert abs(f.mean() - p) > 0.02


def test_paired_difference_on_binary_and_scores():
    a = [1] * 30 + [0] * 10 + [1] * 5 + [0] * 55
    b = [1] * 30 + [0] * 10 + [0] * 5 + [1] * 15 + [0] * 40
    d = inf.paired_difference(a, b, binary=True)
    assert d.diff == pytest.approx((15 - 5) / 100)
    assert d.p_value == pytest.approx(scipy_stats.binomtest(5, 20, 0.5).pvalue)
    assert d.low < d.diff < d.high and d.test == "McNemar exact"
    rng = np.random.default_rng(4)
    x = rng.integers(1, 6, 80).astype(float)
    y = np.clip(x + rng.choice([0, 0, 1], 80), 1, 5)
    s = inf.paired_difference(x, y, binary=False)
    assert s.diff == pytest.approx((y - x).mean())
    assert s.p_value < 0.01 and s.low > 0
    assert s.rows_needed == inf.rows_for_power_paired((y - x).mean(), (y - x).std(ddof=1))


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=400), st.integers(min_value=0, max_value=400))
def test_mcnemar_exact_equals_scipy_on_generated_counts(b, c):
    ref = 1.0 if b + c == 0 else scipy_stats.binomtest(min(b, c), b + c, 0.5).pvalue
    assert inf.mcnemar_exact(b, c) == pytest.approx(ref, rel=1e-9, abs=1e-300)


fleiss_tables = st.integers(min_value=2, max_value=6).flatmap(
    lambda m: st.lists(st.lists(st.integers(min_value=0, max_value=m), min_size=3, max_size=3)
                       .filter(lambda r: sum(r) <= m).map(lambda r, m=m: r + [m - sum(r)]), min_size=2, max_size=30))


@settings(max_examples=200, deadline=None)
@given(fleiss_tables)
def test_fleiss_kappa_equals_its_other_form(counts):
    """Fleiss (1971) written the other way round: 1 - (N m^2 - sum n_ij^2) / (N m (m - 1) sum p_j (1 - p_j))."""
    c = np.array(counts, dtype=float)
    n_rows, m = len(c), c[0].sum()
    p = c.sum(axis=0) / (n_rows * m)
    spread = float((p * (1 - p)).sum())
    ours = ag.fleiss_kappa(counts)
    if spread == 0:
        assert ours is None
        return
    ref = 1 - (n_rows * m * m - float((c * c).sum())) / (n_rows * m * (m - 1) * spread)
    assert ours == pytest.approx(ref, abs=1e-9)
