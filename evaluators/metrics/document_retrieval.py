"""Document retrieval: a search's ranked documents against graded relevance labels (computed, no judge).

As azure-ai-evaluation 1.18's DocumentRetrievalEvaluator computes them, from ``retrieval_ground_truth``
(``[{"document_id", "query_relevance_label": int}]``, labels from 0 to 4 by default) and
``retrieved_documents`` (``[{"document_id", "relevance_score": number}]``, ranked by score, highest first):

- NDCG@3: sum over the top 3 of (2^label - 1) / log2(rank + 1), over the same sum for the labels sorted best first;
- XDCG@3: sum over the top 3 of 25 * label * 0.6^(rank - 1), over sum of 0.6^(rank - 1) (ranks 1-3);
- fidelity: over every retrieved document, each label above the minimum weighted 2^(label + 1) - 1, over the
  same for every labelled document (NaN when no document is labelled above the minimum);
- top-1 relevance, top-3 max relevance: the first document's label and the best of the first three;
- holes: retrieved documents with no label (holes_ratio: their share of the retrieved ones).

A retrieved document without a label counts as label 0. No retrieved document gives every value 0; no
retrieved document with a label above 0 gives 0 for every value but the holes. The row's value is NDCG@3,
held to the run's threshold (0.5 by default); ``document_retrieval_properties`` holds every value with its
own verdict against the SDK's default thresholds (holes: at most 0).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from evaluators.core.agent import parse_json_text
from evaluators.core.registry import MetricSpec, register
from evaluators.core.tasks import RowTask

K = 3
XDCG_DISCOUNT = 0.6
OUTPUTS = (f"ndcg@{K}", f"xdcg@{K}", "fidelity", "top1_relevance", "top3_max_relevance", "holes", "holes_ratio",
           "total_retrieved_documents", "total_ground_truth_documents")
# the SDK's defaults for every value but the primary one (whose threshold is the run's); holes: at most these
THRESHOLDS = {"xdcg@3": 50.0, "fidelity": 0.5, "top1_relevance": 50.0, "top3_max_relevance": 50.0,
              "total_retrieved_documents": 50, "total_ground_truth_documents": 50}
LOWER_IS_BETTER = {"holes": 0, "holes_ratio": 0}
COUNTS = ("holes", "total_retrieved_documents", "total_ground_truth_documents")
FIELDS = ("retrieval_ground_truth", "retrieved_documents")


def _labels(qrels: Any, lo: int, hi: int) -> dict:
    if isinstance(qrels, dict) or not isinstance(qrels, list) or not qrels:
        raise ValueError("retrieval_ground_truth must be a non-empty list of {document_id, query_relevance_label}")
    out = {}
    for k, q in enumerate(qrels):
        if not isinstance(q, dict) or q.get("document_id") is None or q.get("query_relevance_label") is None:
            raise ValueError(f"retrieval_ground_truth[{k}] needs document_id and query_relevance_label")
        label = q["query_relevance_label"]
        if not isinstance(label, int) or isinstance(label, bool):
            raise ValueError(f"retrieval_ground_truth[{k}].query_relevance_label must be a whole number, got {label!r}")
        if not lo <= label <= hi:
            raise ValueError(f"retrieval_ground_truth[{k}].query_relevance_label {label} is outside {lo}-{hi} "
                             "(set the metric's label_min / label_max)")
        out[q["document_id"]] = label
    return out


def _scores(docs: Any) -> dict:
    if docs is None or isinstance(docs, dict) or not isinstance(docs, list):
        if docs is None or docs == "":
            return {}
        raise ValueError("retrieved_documents must be a list of {document_id, relevance_score}")
    out = {}
    for k, d in enumerate(docs):
        if not isinstance(d, dict) or d.get("document_id") is None or d.get("relevance_score") is None:
            raise ValueError(f"retrieved_documents[{k}] needs document_id and relevance_score")
        s = d["relevance_score"]
        if not isinstance(s, (int, float)) or isinstance(s, bool):
            raise ValueError(f"retrieved_documents[{k}].relevance_score must be a number, got {s!r}")
        out[d["document_id"]] = s
    return out


def _dcg(labels: list[int]) -> float:
    return sum((2.0 ** rel - 1) / math.log2(rank + 1) for rank, rel in enumerate(labels[:K], 1))


def _weighted(labels: list[int], lo: int, hi: int) -> float:
    """Fidelity's weighted count: labels above ``lo``, each weighted 2^(label + 1) - 1 (in the SDK's order:
    label counts sorted by the label's text, so 10 comes before 2; the sum is the same)."""
    counts = {str(i): 0 for i in range(lo + 1, hi + 1)}
    for label in labels:
        if label >= lo + 1:
            counts[str(label)] += 1
    ordered = [c for _, c in sorted(counts.items())]
    weights = [2.0 ** (i + 1) - 1 for i in range(lo + 1, hi + 1)]
    return sum(c * w for c, w in zip(ordered, weights))


def document_retrieval(qrels: Any, docs: Any, lo: int = 0, hi: int = 4) -> dict[str, float]:
    """Every value of the metric for one query (see the module docstring)."""
    labels = _labels(parse_json_text(qrels), lo, hi)
    scores = _scores(parse_json_text(docs))
    n, m = len(scores), len(labels)
    if n == 0:
        return dict.fromkeys(OUTPUTS, 0.0) | {"holes": 0, "holes_ratio": 0, "total_retrieved_documents": 0,
                                               "total_ground_truth_documents": m}
    ranked = [d for d, _ in sorted(scores.items(), key=lambda x: x[1], reverse=True)]
    got = [labels.get(d, 0) for d in ranked]
    ideal = sorted(labels.values(), reverse=True)
    holes = len(set(ranked) - set(labels))
    if not any(got):
        return dict.fromkeys(OUTPUTS, 0) | {"holes": holes, "holes_ratio": holes / n, "total_retrieved_documents": n,
                                             "total_ground_truth_documents": m}
    xdcg_d = sum(XDCG_DISCOUNT ** (r - 1) for r in range(1, K + 1))
    wideal = _weighted(ideal, lo, hi)
    return {f"ndcg@{K}": _dcg(got) / _dcg(ideal),
            f"xdcg@{K}": sum(25 * rel * XDCG_DISCOUNT ** (r - 1) for r, rel in enumerate(got[:K], 1)) / xdcg_d,
            "fidelity": math.nan if wideal == 0 else _weighted(got, lo, hi) / wideal,
            "top1_relevance": got[0], "top3_max_relevance": max(got[:K]), "holes": holes, "holes_ratio": holes / n,
            "total_retrieved_documents": n, "total_ground_truth_documents": m}


def properties(spec: MetricSpec, outputs: Mapping[str, Any], threshold: float) -> dict[str, Any]:
    """``document_retrieval_properties`` as the SDK writes it: each value, then each one's verdict."""
    props: dict[str, Any] = {k: (int(outputs[k]) if k in COUNTS and outputs.get(k) is not None else outputs.get(k))
                             for k in OUTPUTS}
    for k in OUTPUTS:
        v = outputs.get(k)
        lower = k in LOWER_IS_BETTER
        t = LOWER_IS_BETTER[k] if lower else (threshold if k == spec.primary else THRESHOLDS[k])
        ok = None if v is None else (v <= t if lower else v >= t)
        props[f"{k}_result"] = None if ok is None else ("pass" if ok else "fail")
        props[f"{k}_passed"] = ok
        props[f"{k}_threshold"] = t
        props[f"{k}_higher_is_better"] = not lower
    return props


def row_tasks(ds, i: int, spec: MetricSpec) -> list[RowTask]:
    """One computed task per row, on the two lists as the file gives them (labels are not text)."""
    values = {f: ds.value(i, f) for f in FIELDS}
    if values["retrieval_ground_truth"] in (None, "", []):
        return [RowTask(0, values, "single", skip="no retrieval_ground_truth")]
    return [RowTask(0, values, "single")]


def compute(row: Mapping[str, Any]) -> dict[str, float]:
    """The values of one row (labels 0-4, the SDK's default range)."""
    return document_retrieval(row.get("retrieval_ground_truth"), row.get("retrieved_documents"))


def _spec() -> MetricSpec:
    return MetricSpec(
        name="document_retrieval", family="agents", kind="score", fields=FIELDS, conversation_fields=None,
        prefix="document_retrieval", outputs=OUTPUTS, score_range=(0.0, 1.0), higher_is_better=True,
        default_threshold=0.5, description="Ranked retrieval against graded labels: NDCG@3, XDCG@3, fidelity, "
                                           "top-k relevance and holes (computed).",
        compute=compute, row_tasks=row_tasks, properties=properties)


SPEC = register(_spec())
