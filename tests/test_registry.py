"""One generic test walks the registry and checks every metric's contract."""
from __future__ import annotations

import pytest

from evaluators.data.loading import load_dataset
from evaluators.core.registry import FAMILIES, KINDS, all_metrics, get_metric
from evaluators.core.errors import UsageError
from evaluators.run.spec import resolve_templates
from tests.conftest import CONVERSATIONS, SINGLE

pytestmark = pytest.mark.no_store  # opens no store: deselected in the PostgreSQL pass

SPECS = all_metrics()
ROW = {"query": "What colour is the sky on a clear day?", "response": "The sky is blue on a clear day.",
       "ground_truth": "The sky is blue on a clear day.", "context": "A clear sky looks blue."}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_metric_contract(spec):
    assert spec.family in FAMILIES and spec.kind in KINDS
    lo, hi = spec.score_range
    assert lo < hi and lo <= spec.default_threshold <= hi
    assert spec.outputs and spec.description
    assert spec.signature().startswith(f"{spec.name}|v:")
    if spec.is_judge:
        assert spec.compute is None
        templates = resolve_templates(spec, {})
        assert templates, "a judge metric needs at least one template"
        for t in templates.values():
            assert {"response", "candidate_A"} & t.placeholders or spec.name == "retrieval"
            # every built-in template asks for the JSON verdict its kind parses
            assert {"label": '"label"', "pairwise": '"choice"'}.get(spec.kind, '"score"') in t.user
    elif spec.row_tasks is None:  # a computed metric that plans its own inputs is checked with them (test_agents)
        out = spec.compute(ROW)
        assert set(out) == set(spec.outputs)
        assert all(lo <= v <= hi for v in out.values())
        # identical response and ground truth is the best a reference metric can give (METEOR keeps
        # a small fragmentation penalty by design: 1 - 0.5 * (1/n)^3)
        assert out[spec.primary] >= 0.99


def test_unknown_metric_lists_known_ones():
    with pytest.raises(UsageError, match="Known metrics: .*coherence"):
        get_metric("cohrence")


def test_availability_follows_the_sdk_inputs():
    # Each judge metric needs what azure-ai-evaluation 1.18's evaluator reads (its prompty inputs).
    single = load_dataset(SINGLE)
    avail = {k for k, v in single.availability().items() if not v}
    assert {"coherence", "fluency", "groundedness", "relevance", "retrieval", "similarity", "f1_score", "bleu",
            "gleu", "rouge", "meteor"} <= avail
    qr = load_dataset([{"query": "q", "response": "r"}])
    missing = qr.availability()
    assert missing["coherence"] == [] and missing["fluency"] == [] and missing["relevance"] == []
    assert missing["groundedness"] == ["context"] and missing["retrieval"] == ["context"]
    assert load_dataset([{"response": "r"}]).availability()["fluency"] == []
    assert missing["similarity"] == ["ground_truth"] and missing["bleu"] == ["ground_truth"]
    with_ctx = load_dataset([{"query": "q", "response": "r", "context": "c"}])
    assert with_ctx.availability()["groundedness"] == [] and with_ctx.availability()["bleu"] == ["ground_truth"]
    conv = load_dataset(CONVERSATIONS)
    cavail = {k for k, v in conv.availability().items() if not v}
    assert {"coherence", "fluency", "groundedness", "retrieval"} <= cavail
    assert not ({"similarity", "f1_score", "bleu", "gleu", "rouge", "meteor"} & cavail)


def test_every_built_in_metric_has_a_readable_name_and_one_line_saying_what_it_measures():
    """Issue 35: the dashboard named metrics by their keys. evaluators.core.names holds a name for each built-in,
    and each declares one line of what it measures; no name is kept for a metric that no longer exists."""
    from evaluators.core.names import NAMES, about, display_name

    built_in = {s.name: s for s in all_metrics() if s.definition is None}
    assert set(NAMES) == set(built_in)
    for name, spec in built_in.items():
        assert display_name(spec) == NAMES[name] and NAMES[name] != name and NAMES[name][0].isupper(), name
        assert spec.description and "\n" not in spec.description and len(spec.description) <= 160, name
    assert display_name(built_in["f1_score"]) == "F1 word overlap"
    assert about(built_in["violence"]) == "Violence (violence): Severity (0-7) of violent content in the response."
