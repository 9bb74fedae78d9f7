"""One reading of a judge's reply for every kind of metric: a verdict inside unfinished reasoning is no verdict.

A reasoning model cut at ``max_tokens`` while thinking sends ``<think>... {"label": false}`` with no
closing tag: what it wrote there is a draft, not its answer. Each kind must refuse it, and accept the
same verdict once it follows a closed ``<think>`` block.
"""
from __future__ import annotations

import pytest

from evaluators import get_metric
from evaluators.core.replies import ReplyError, answer_body

pytestmark = pytest.mark.no_store  # opens no store: deselected in the PostgreSQL pass

# (metric, a verdict in the reply format its template asks for, the primary output that verdict gives)
VERDICTS = [
    ("coherence", '{"reason": "clear", "score": 4}', 4.0),
    ("violence", '{"reason": "none", "score": 0}', 0.0),
    ("protected_material", '{"reason": "original text", "label": false}', False),
    ("indirect_attack", '{"reason": "ok", "label": false}', False),
    ("wildbench_score", '{"strengths": "s", "weaknesses": "w", "score": 7}', 7.0),
    ("wildbench_pairwise", '{"analysis of A": "a", "analysis of B": "b", "choice": "A+"}', 50.0),
]


@pytest.mark.parametrize("metric,verdict,value", VERDICTS, ids=[v[0] for v in VERDICTS])
def test_a_verdict_after_closed_reasoning_is_read(metric, verdict, value):
    spec = get_metric(metric)
    reply = '<think>Draft: {"score": 1, "label": true, "choice": "B++"}. Let me check again.</think>\n' + verdict
    assert spec.parse_reply(reply).outputs[spec.primary] == value


@pytest.mark.parametrize("metric,verdict,value", VERDICTS, ids=[v[0] for v in VERDICTS])
def test_a_verdict_inside_unclosed_reasoning_is_refused(metric, verdict, value):
    spec = get_metric(metric)
    with pytest.raises(ReplyError):
        spec.parse_reply("<think>The reply should probably be " + verdict + " but let me weigh the context")


def test_the_answer_body_keeps_only_what_follows_reasoning():
    assert answer_body('<think>a</think>{"x": 1}').strip() == '{"x": 1}'
    assert answer_body('<THINK>a</THINK> b <think>c {"x": 2}').strip() == "b"  # the unfinished block is cut
    assert answer_body('<think>{"x": 1} draft').strip() == ""
    assert answer_body('reasoning {"x": 1}</think> {"x": 2}').strip() == '{"x": 2}'  # opener was in the prompt
    with pytest.raises(ReplyError, match="empty reply"):
        answer_body("  ")
