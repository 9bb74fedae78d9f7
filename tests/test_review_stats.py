"""What the agreement object says in words: the agreement verdict from Cohen's kappa on Landis and Koch's bands
(Biometrics 1977, Table: < 0 poor, 0.00-0.20 slight, 0.21-0.40 fair, 0.41-0.60 moderate, 0.61-0.80
substantial, 0.81-1.00 almost perfect), the warning when kappa's interval lies below 0, and the reviews a
± 5-point corrected rate needs, in the sentence the dashboard shows."""
from __future__ import annotations

import pytest

from evaluators.core.inference import Corrected
from evaluators.review.stats import MetricAgreement, kappa_verdict

pytestmark = pytest.mark.no_store  # opens no store: deselected in the PostgreSQL pass


@pytest.mark.parametrize("kappa, band", [
    (0.0, "slight"), (0.20, "slight"), (0.21, "fair"), (0.40, "fair"), (0.41, "moderate"), (0.60, "moderate"),
    (0.61, "substantial"), (0.80, "substantial"), (0.81, "almost perfect"), (1.0, "almost perfect"),
])
def test_kappa_bands_are_landis_and_koch(kappa, band):
    assert kappa_verdict(kappa, kappa - 0.1, min(1.0, kappa + 0.1)) == (
        f"Judge and reviewers: {band} agreement (Cohen's κ {kappa:.2f} [{kappa - 0.1:.2f}, "
        f"{min(1.0, kappa + 0.1):.2f}], on Landis and Koch's scale).")


def test_kappa_below_chance_says_not_to_trust_the_rate():
    # the case: kappa -0.80 [-1.00, -0.21]
    assert kappa_verdict(-0.80, -1.00, -0.21) == ("The judge disagrees with your reviewers more than chance "
                                                   "(Cohen's κ -0.80 [-1.00, -0.21]): do not trust this metric's rate.")
    # below 0 but the interval reaches 0: no better than chance, not shown to be worse
    assert kappa_verdict(-0.10, -0.40, 0.20) == ("The judge agrees with your reviewers no better than chance "
                                                  "(Cohen's κ -0.10 [-0.40, 0.20], poor on Landis and Koch's scale): "
                                                  "its rate says little.")
    assert kappa_verdict(0.5) == "Judge and reviewers: moderate agreement (Cohen's κ 0.50, on Landis and Koch's scale)."
    assert kappa_verdict(None) == "" and kappa_verdict(float("nan"), None, None) == ""
    assert kappa_verdict(0.3, float("nan"), float("nan")) == ("Judge and reviewers: fair agreement (Cohen's κ 0.30, "
                                                             "on Landis and Koch's scale).")


def _agreement(kappa, corrected) -> MetricAgreement:
    return MetricAgreement("violence", "defect_rate", 60, 60, kappa=kappa, judged=0.2, corrected=corrected)


def test_sentence_says_the_reviews_five_points_need_and_the_verdict():
    # var_judged 1e-4 over 2,940 unreviewed rows, var_reviewed 0.0025 from 60 reviews: 217 more (hand-computed
    # in tests/test_inference_ppi.py: 277 reviews give a variance of 6.4949e-4 <= (0.05 / 1.96)^2)
    c = Corrected(0.2, 0.565, 0.066, 1.0, 3000, 60, var_judged=1e-4, var_reviewed=0.0025)
    a = _agreement((-0.80, -1.00, -0.21), c)
    assert a.more_reviews == 217 and a.distrusted
    assert a.sentence() == ("defect rate 20.0% as judged; 56.5% [6.6, 100.0] corrected by 60 reviews (about 217 more "
                            "would narrow it to ± 5 points). The judge disagrees with your reviewers more than "
                            "chance (Cohen's κ -0.80 [-1.00, -0.21]): do not trust this metric's rate.")
    narrow = _agreement((0.7, 0.6, 0.8), Corrected(0.2, 0.21, 0.18, 0.24, 3000, 400, 1e-5, 2e-4))
    assert narrow.more_reviews == 0 and not narrow.distrusted
    assert narrow.sentence() == ("defect rate 20.0% as judged; 21.0% [18.0, 24.0] corrected by 400 reviews. Judge and "
                                 "reviewers: substantial agreement (Cohen's κ 0.70 [0.60, 0.80], on Landis and "
                                 "Koch's scale).")
    none = MetricAgreement("violence", "defect_rate", 0, 0, judged=0.2)
    assert none.more_reviews is None and not none.distrusted
    assert none.sentence() == "defect rate 20.0% as judged; no review yet"
