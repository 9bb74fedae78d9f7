"""README guarantees checked against outside references: intervals against SciPy, the HTML report's
escaping, and CSV formula neutralisation for every prefix a spreadsheet runs.

Only the comparisons with SciPy need it (requirements-dev.txt): without it they are skipped, each with
the reason (``pytest -rs`` lists them), and the rest of the module still runs."""
from __future__ import annotations

import csv
import io
import random

import pytest

from evaluators.data.loading import load_dataset
from evaluators.read.exports import csv_text
from evaluators.core.registry import get_metric
from evaluators.read.report import html_report
from evaluators.read.results import RunResults, mean_ci, wilson
from evaluators.store.schema import Result

pytestmark = pytest.mark.no_store  # opens no store: deselected in the PostgreSQL pass

try:
    import scipy.stats as scipy_stats

    _no_scipy = ""
except ImportError as e:  # (not installed, or installed broken: either way no reference to compare with)
    scipy_stats, _no_scipy = None, f"{type(e).__name__}: {e}"
needs_scipy = pytest.mark.skipif(scipy_stats is None, reason="the reference intervals need SciPy "
                                 f"(requirements-dev.txt), which does not import here ({_no_scipy})")


def _samples():
    rng = random.Random(7)
    out = [[3.0, 4.0], [1, 5, 5, 2, 4], [0.2, 0.9, 0.4]]
    for n in (8, 12, 29, 30, 31, 45, 60, 120, 500, 2000):
        out.append([rng.choice([1, 2, 3, 4, 5]) for _ in range(n)])
        out.append([rng.random() for _ in range(n)])
    return out


@needs_scipy
@pytest.mark.parametrize("values", _samples(), ids=lambda v: f"n={len(v)}")
def test_mean_ci_matches_scipy_t_interval(values):
    import numpy as np

    m, lo, hi = mean_ci(values)
    ref_lo, ref_hi = scipy_stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=scipy_stats.sem(values))
    assert m == pytest.approx(np.mean(values), abs=1e-12)
    half, ref_half = (hi - lo) / 2, (ref_hi - ref_lo) / 2
    # the table holds t to 3 decimals and interpolates past 30 degrees of freedom: within 0.05% of SciPy
    assert half == pytest.approx(ref_half, rel=5e-4)
    assert lo == pytest.approx(ref_lo, abs=5e-4 * ref_half + 1e-12)


def test_mean_ci_edges():
    assert mean_ci([]) == (None, None, None)
    assert mean_ci([4.0]) == (4.0, None, None)
    assert mean_ci([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)


@pytest.mark.parametrize("k,n", [(0, 1), (1, 1), (0, 10), (10, 10), (3, 10), (1, 31), (17, 31), (50, 100),
                                 (999, 1000), (1, 100000), (4321, 10000)])
@needs_scipy
def test_wilson_matches_scipy(k, n):
    p, lo, hi = wilson(k, n)
    ci = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert p == k / n
    assert lo == pytest.approx(ci.low, abs=1e-6) and hi == pytest.approx(ci.high, abs=1e-6)


def test_wilson_empty():
    assert wilson(0, 0) == (None, None, None)


# ---------------------------------------------------------------------------- HTML report escaping
PAYLOAD = "<script>alert('x')</script><img src=x onerror=alert(1)>"


def test_html_report_escapes_model_and_dataset_text():
    data = [{"query": f"q {PAYLOAD}", "response": f"r {PAYLOAD}"}, {"query": "plain", "response": "plain"}]
    ds = load_dataset(data)
    spec = get_metric("coherence")
    results = [Result(0, "coherence", 0, "ok", value=4.0, outputs={spec.primary: 4.0}, reason=f"reason {PAYLOAD}"),
               Result(1, "coherence", 0, "error", error=f"error {PAYLOAD}")]
    res = RunResults(ds, results, [spec])
    page = html_report(res, {"name": f"run {PAYLOAD}", "status": "completed", "spec": {}})
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page  # shown as text, in every place
    assert page.count("&lt;img src=x onerror=alert(1)&gt;") >= 5  # title, heading, query, response, reason, error


# ---------------------------------------------------------------------------- CSV formula neutralisation
@pytest.mark.parametrize("prefix", ["=", "+", "-", "@", "\t", "\r"])
def test_csv_neutralises_every_formula_prefix(prefix):
    cell = f"{prefix}HYPERLINK(\"http://evil.example\",\"x\")"
    text = csv_text([{"response": cell, f"{prefix}col": "ok", "n": -3.5}])
    header, row = list(csv.reader(io.StringIO(text)))
    assert header[1] == "'" + f"{prefix}col"
    assert row[0] == "'" + cell
    assert row[2] == "-3.5"  # numbers are numbers, not formulas
