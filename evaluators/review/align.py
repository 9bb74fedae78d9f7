"""Aligning a judge with its reviewers (issue 34): the flow from a run's reviewed rows to a gated candidate.

1. Each reviewed row of the metric is dealt once to train, dev or test (the store's splits, never reassigned).
2. The baseline card: the current judge against the reviewers on dev and on test.
3. Candidates from train rows only (:mod:`evaluators.review.align_candidates`): rules a proposer call distils
   from reviewers' notes on train disagreements, worked examples, or both.
4. Each candidate judges the dev rows (through the judge client and its cache); the best κ on dev is chosen.
5. One gate on test (:func:`evaluators.review.align_stats.gate`), counted as a use of the test split.

``align(store, run_id, metric, judge)`` is the Python entry point; ``python -m evaluators align`` calls it.
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import numpy as np

from evaluators.core.errors import UsageError
from evaluators.core.scales import consensus, human_pass, ordinal, scale, snap
from evaluators.judge.config import JudgeConfig
from evaluators.judge.templates import Template
from evaluators.read.repeats import repeat_agreement
from evaluators.read.view import open_view
from evaluators.review import dataset_reviews
from evaluators.review.align_candidates import (METHODS, AlignRow, Candidate, build, choose_examples, disagreements,
                                                draft_metric, proposer_messages, read_rules, shapers,
                                                template_text, with_section)
from evaluators.review.align_rates import corrected_rates
from evaluators.review.align_stats import gate, length_bias, split_card
from evaluators.run.judging import CachedJudge
from evaluators.run.planning import _Task, iter_tasks
from evaluators.run.spec import RunSpec, resolve_templates
from evaluators.store.store import Store


class _RunPart:
    """One run's side of alignment: its results, the metric as it judged it, its dataset and template."""

    def __init__(self, store: Store, run_id: str, metric: str):
        try:
            run = store.get_run(run_id)
        except KeyError:
            raise UsageError(f"no run {run_id!r} in this store") from None
        self.run_id, self.results = run_id, open_view(store, run_id)
        spec = next((s for s in self.results.specs if s.name == metric), None)
        if spec is None or not spec.is_judge:
            judged = ", ".join(s.name for s in self.results.specs if s.is_judge) or "none"
            raise UsageError(f"run {run_id} has no judge metric {metric!r} (its judge metrics: {judged})")
        self.spec, self.threshold = spec, self.results.thresholds[metric]
        self.run_spec = RunSpec.from_dict(run["spec"])
        self.run_spec.metrics = [metric]
        self.ds = store.open_dataset(run["dataset_id"])
        if self.ds.shape != "single":
            raise UsageError(f"alignment reads single-turn rows; run {run_id}'s dataset is made of conversations")
        self.template: Template = resolve_templates(spec, self.run_spec.templates, self.run_spec.template_texts)["single"]

    def reviewed(self, store: Store) -> list[tuple]:
        """(this part, row, the reviewers' value, the judge's value, the row's fields, notes) of each row both a
        reviewer and the judge gave a value."""
        spec = self.spec
        by_row: dict[int, list[dict]] = {}
        for r in store.reviews(self.run_id, metric=spec.name) + dataset_reviews(store, self.run_id, self.results,
                                                                               spec.name):
            if r["value"] is not None:
                by_row.setdefault(int(r["row_idx"]), []).append(r)
        values = self.results.values(spec.name)
        judged = {i: float(values[i]) for i in by_row if not math.isnan(values[i])}
        tasks = {t.row: t for t in iter_tasks(self.ds, self.run_spec, set(), rows=set(judged))
                 if isinstance(t, _Task) and t.turn == 0}
        return [(self, i, consensus(spec, [r["value"] for r in by_row[i]]), judged[i], dict(tasks[i].values),
                 [r["note"] for r in by_row[i] if r.get("note")]) for i in sorted(judged) if i in tasks]


class _Reviewed:
    """The reviewed rows of one metric, of a run and of any further runs of it, with what alignment reads of them.

    The first run's template is the one aligned and its judge the current one; further runs must have judged the
    metric at the same version, settings and threshold (their reviewed rows are the same question asked again).
    """

    def __init__(self, store: Store, run_id: str, metric: str, seed: int, also: tuple[str, ...] = ()):
        main = _RunPart(store, run_id, metric)
        self.parts = [main] + [_RunPart(store, r, metric) for r in dict.fromkeys(also) if r != run_id]
        for p in self.parts[1:]:
            if p.spec.signature() != main.spec.signature() or p.threshold != main.threshold:
                raise UsageError(f"run {p.run_id} judged {metric} otherwise than run {run_id} ({p.spec.signature()} at "
                                 f"{p.threshold:g}, not {main.spec.signature()} at {main.threshold:g}): align runs of "
                                 "one metric version at one threshold")
        self.spec, self.threshold, self.template = main.spec, main.threshold, main.template
        self.run_spec, self.results, self.ds = main.run_spec, main.results, main.ds
        self.notes: list[str] = []  # what could not be made, for alignment.json
        self.rows = self._rows(store, seed)
        repeats = repeat_agreement(main.results, metric)  # None when each task was judged once
        self.self_consistency = None if repeats is None else {k: v for k, v in repeats.items() if k != "flip_rows"}

    def _rows(self, store: Store, seed: int) -> list[AlignRow]:
        spec, threshold = self.spec, self.threshold
        found = [x for p in self.parts for x in p.reviewed(store)]
        verdicts = {(p.run_id, i): "pass" if human_pass(spec, h, threshold) else "fail" for p, i, h, *_ in found}
        splits = store.assign_splits(spec.name, verdicts, seed=seed)  # every run's rows dealt together
        kind = spec.kind_impl
        return [AlignRow(p.run_id, i, splits[(p.run_id, i)], int(verdicts[(p.run_id, i)] == "pass"),
                         int(bool(kind.turn_passed(spec, j, threshold))), float(h), float(snap(spec, j)), values, notes)
                for p, i, h, j, values, notes in found]

    def split(self, name: str) -> list[AlignRow]:
        return [r for r in self.rows if r.split == name]

    @property
    def train(self) -> list[AlignRow]:
        """The train rows candidates learn from (:func:`shapers`: none whose text a held-out row shares)."""
        return shapers(self.rows, self.fields)

    @property
    def fields(self) -> list[str]:
        return [f for f in self.spec.fields if f in self.template.placeholders] or sorted(self.template.placeholders)


class _Judging(CachedJudge):
    """The judge's calls for an alignment: cached calls (:class:`~evaluators.run.judging.CachedJudge`), and a
    candidate's pass/fail verdicts on reviewed rows."""

    def verdicts(self, template: Template, reviewed: _Reviewed, rows: list[AlignRow]) -> dict[tuple, int | None]:
        """(run, row) -> pass (1) or fail (0) of ``template`` on each row; None where the call or its reply failed."""
        spec = reviewed.spec
        got = self.values(template, spec, [(r.ident, r.values) for r in rows])
        return {i: None if v is None else int(bool(spec.kind_impl.turn_passed(spec, v, reviewed.threshold)))
                for i, v in got.items()}


def _card(reviewed: _Reviewed, rows: list[AlignRow], judge: dict[tuple, int | None] | None = None,
          seed: int = 0) -> dict[str, Any]:
    """The split card of the current judge (``judge`` None) or a candidate's verdicts on ``rows``."""
    spec = reviewed.spec
    if judge is not None:
        rows = [r for r in rows if judge.get(r.ident) is not None]
        return split_card([r.human for r in rows], [judge[r.ident] for r in rows], seed=seed)
    scale_values = [c.value for c in scale(spec)] if ordinal(spec) else None
    return split_card([r.human for r in rows], [r.judge for r in rows], [r.human_value for r in rows],
                      [r.judge_value for r in rows], scale_values, seed=seed)


def baseline(reviewed: _Reviewed, judge_model: str | None, seed: int = 0) -> dict[str, Any]:
    """The current judge's card: dev and test numbers, the length bias over every reviewed row and, where the
    run asked each task more than once, the judge's agreement with itself (``self_consistency``)."""
    lengths = _lengths(reviewed.rows)
    return {"metric_version": reviewed.spec.version, "judge_model": judge_model,
            "dev": _card(reviewed, reviewed.split("dev"), seed=seed),
            "test": _card(reviewed, reviewed.split("test"), seed=seed),
            "length_bias": length_bias([r.judge_value for r in reviewed.rows], [r.human_value for r in reviewed.rows],
                                       lengths, seed),
            "self_consistency": reviewed.self_consistency}


def _lengths(rows: list[AlignRow]) -> list[int]:
    """Each row's answer length in characters (its response, else all its fields), as the length bias reads it."""
    return [len(str(r.values.get("response") or " ".join(str(v) for v in r.values.values() if v))) for r in rows]


def propose_rules(judging: _Judging, reviewed: _Reviewed, proposer: JudgeConfig | None = None) -> list[dict]:
    """Rules from the reviewers' notes on train disagreements, by one proposer call (the judge by default)."""
    cases = disagreements(reviewed.train)
    if not cases:
        return []
    messages, ids = proposer_messages(reviewed.spec.name, cases, reviewed.fields)
    who = proposer or judging.judge
    key = hashlib.sha256(json.dumps(["align-proposer", messages, who.identity()], sort_keys=True,
                                    ensure_ascii=False).encode()).hexdigest()
    asker = judging if proposer is None else _Judging(judging.store, judging.run_id, proposer, judging.api_key)
    reply = asker.ask_many([(key, messages, None)], lambda text: _rules_or_none(text, ids) is not None)[0]
    if reply is None:
        raise UsageError("the proposer call failed or its reply held no rules; try again (a usable reply is cached)")
    return read_rules(reply, ids)


def _rules_or_none(text: str, ids: dict) -> list[dict] | None:
    try:
        return read_rules(text, ids)
    except UsageError:
        return None


def candidates(judging: _Judging, reviewed: _Reviewed, method: str, seed: int = 0,
               proposer: JudgeConfig | None = None) -> list[Candidate]:
    """The candidates ``method`` asks for ("rules", "examples" or "both": all three), from train rows only."""
    if method not in METHODS:
        raise UsageError(f"--method must be one of {', '.join(METHODS)}, not {method!r}")
    train = reviewed.train
    wanted = ["rules", "examples", "both"] if method == "both" else [method]
    rules = []
    if {"rules", "both"} & set(wanted):
        try:
            rules = propose_rules(judging, reviewed, proposer)
        except UsageError as e:
            if method == "rules":
                raise
            reviewed.notes.append(f"no rules: {e}")  # the examples are still tried
    examples = choose_examples(train, seed) if {"examples", "both"} & set(wanted) else []
    out = []
    for m in wanted:
        if (m != "examples" and not rules) or (m != "rules" and not examples):
            continue  # nothing to add of this kind (no disagreement on train, or one verdict missing)
        c = build(m, reviewed.template, rules, examples, reviewed.fields)
        c.metric_text = draft_metric(reviewed.spec.definition, c.text)
        out.append(c)
    return out


def _row_ids(store: Store, run_id: str) -> dict[int, str]:
    """Row index -> the row's id as people know it (the dataset's ``id`` column, else its row number)."""
    run = store.get_run(run_id)
    ds = store.open_dataset(run["dataset_id"])
    if "id" in ds.columns:
        return {i: str(v) for i, v in store.dataset_texts(run["dataset_id"], ["id"])}
    return {i: str(ds.row_no(i)) for i in range(len(ds))}


def _word(v: int | None) -> str | None:
    return None if v is None else ("pass" if v else "fail")


def run_gate(store: Store, judging: _Judging, reviewed: _Reviewed, chosen: Candidate, seed: int = 0) -> dict:
    """Judge the test rows with the chosen candidate, once, and compare it there with the current template under
    the same judge (the run's replies, from the cache, when it is the run's judge: another judge is compared
    with itself, not with the run's). The test split's use is counted first: a gate that fails half-way has
    still shown its rows to a decision."""
    test = reviewed.split("test")
    uses = store.count_test_use(reviewed.spec.name)
    current = judging.verdicts(reviewed.template, reviewed, test)
    judged = judging.verdicts(chosen.template, reviewed, test)
    kept = [r for r in test if judged[r.ident] is not None and current[r.ident] is not None]
    out = gate([r.human for r in kept], [current[r.ident] for r in kept], [judged[r.ident] for r in kept], seed)
    ids = {p.run_id: _row_ids(store, p.run_id) for p in reviewed.parts}
    out["test_uses"] = uses
    out["unjudged_rows"] = len(test) - len(kept)
    out["rows"] = [{"id": ids[r.run_id].get(r.row_idx, str(r.row_idx)), "run_id": r.run_id, "human": _word(r.human),
                    "current": _word(current[r.ident]), "candidate": _word(judged[r.ident])} for r in test]
    return out


def align(store: Store, run_id: str, metric: str, judge: JudgeConfig | dict | None = None, *, api_key: str | None = None,
          method: str = "both", seed: int = 0, proposer: JudgeConfig | None = None,
          rates: bool = False, runs: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
    """Align ``metric``'s judge in run ``run_id`` with its reviewers: splits, baseline, candidates chosen on dev,
    and one gate on test.

    Args:
        judge: the judge that judges the candidates (a ``JudgeConfig`` or its dict; default: the run's own, whose
            replies to the current template are then all in the cache); its replies are cached.
        method: "rules", "examples" or "both" (rules, examples and the two together, the best on dev gated).
        seed: deals new rows into splits, orders examples, seeds the bootstrap intervals.
        proposer: the model that distils rules (default: ``judge``).
        runs: further runs of the metric (same version, settings and threshold) whose reviewed rows join the
            splits; ``run_id``'s template is the one aligned.
        rates: when the gate says "better", also judge every row of the run with the candidate and give the run's
            corrected rate with each judge (``rates``: :func:`evaluators.review.align_rates.corrected_rates`).
    Returns:
        What ``alignment.json`` holds: ``baseline``, ``candidates`` (each ``method``, ``template``, ``rules``,
        ``examples``, ``dev``), ``selected`` and ``gate`` (None when no candidate could be made).
    Raises:
        UsageError: no such run or judge metric, conversations, too few reviewed rows to split.
    """
    reviewed = _Reviewed(store, run_id, metric, seed, tuple(runs))
    judge = _judge_of(reviewed, judge)
    sizes = {s: len(reviewed.split(s)) for s in ("train", "dev", "test")}
    if min(sizes.values()) < 2:
        raise UsageError(f"{len(reviewed.rows)} reviewed and judged rows of {metric} split into {sizes}: review more "
                         "rows (each split needs at least 2) before aligning")
    judging = _Judging(store, run_id, judge, api_key)
    out: dict[str, Any] = {"run_id": run_id, "runs": [p.run_id for p in reviewed.parts], "metric": metric,
                           "method": method, "seed": seed, "splits": sizes,
                           "current_template": template_text(reviewed.template),
                           "baseline": baseline(reviewed, judge.model, seed)}
    made = candidates(judging, reviewed, method, seed, proposer)
    dev = reviewed.split("dev")
    listed = []
    for c in made:
        card = _card(reviewed, dev, judging.verdicts(c.template, reviewed, dev), seed)
        listed.append({"method": c.method, "template": c.text, "metric_text": c.metric_text, "rules": c.rules,
                       "examples": c.examples, "dev": card})
    out["candidates"] = listed
    if reviewed.notes:
        out["notes"] = reviewed.notes
    if not made:
        out["selected"], out["gate"] = None, None
        out["note"] = ("no candidate could be made from the train rows (the judge and the reviewers disagree on none "
                       "of them, or the reviewers gave one verdict only)")
        return out
    best = max(range(len(made)), key=lambda n: (_kappa_or(listed[n]["dev"]), -n))
    out["selected"] = made[best].method
    out["gate"] = run_gate(store, judging, reviewed, made[best], seed)
    if rates and out["gate"]["verdict"] == "better":
        out["rates"] = rates_with(judging, reviewed, made[best].template, seed)
    out["judge_calls"] = judging.calls
    return out


def rates_with(judging: _Judging, reviewed: _Reviewed, template: Template, seed: int = 0) -> dict[str, Any]:
    """The run's corrected rate with ``template`` judging every row (replies already in the cache are not asked
    again: the reviewed rows the gate and dev judged cost nothing) beside the current judge's."""
    spec = reviewed.spec
    tasks = [(t.row, dict(t.values)) for t in iter_tasks(reviewed.ds, reviewed.run_spec, set())
             if isinstance(t, _Task) and t.turn == 0]
    got = judging.values(template, spec, tasks)
    new = np.full(len(reviewed.ds), np.nan)
    for i, v in got.items():
        if v is not None:
            new[i] = v
    out = corrected_rates(judging.store, judging.run_id, reviewed.results, spec, reviewed.threshold, new, seed)
    out["judged_rows"] = int((~np.isnan(new)).sum())
    return out


def promote(store: Store, alignment: dict[str, Any], created_by: str | None = None) -> dict[str, Any]:
    """Save the gated candidate of ``alignment`` (what :func:`align` returned) as the metric's next version, with
    its provenance (run, method, rules and examples with their rows, the gate's numbers, the test split's uses).

    Returns:
        The saved version (``store.saved_metric``'s dict).
    Raises:
        UsageError: the gate did not call the candidate "better", or the metric has no template file to version.
    """
    g = alignment.get("gate")
    if not g or g.get("verdict") != "better":
        said = "no gate was run" if not g else f"the gate said {g.get('verdict')!r}"
        raise UsageError(f"only a candidate the gate called better is promoted; {said}")
    chosen = next(c for c in alignment["candidates"] if c["method"] == alignment["selected"])
    if not chosen.get("metric_text"):
        raise UsageError(f"{alignment['metric']} is not a metric file in our template form, so it has no next version "
                         "to save: copy its prompt into a metric file of your own (our template form), run with it, "
                         "and align that")
    saved = store.save_metric(chosen["metric_text"], "template", created_by=created_by)
    if store.promotion(saved["name"], saved["version"]) is None:  # (promoting the same text twice saves it once)
        store.save_promotion(saved["name"], saved["version"], {
            "run_id": alignment["run_id"], "runs": alignment.get("runs", [alignment["run_id"]]),
            "metric": alignment["metric"], "method": chosen["method"],
            "seed": alignment["seed"], "splits": alignment["splits"], "rules": chosen["rules"],
            "examples": chosen["examples"], "gate": {k: v for k, v in g.items() if k != "rows"}}, created_by)
    return saved


def _judge_of(reviewed: _Reviewed, judge: JudgeConfig | dict | None) -> JudgeConfig:
    if judge is None:
        if reviewed.run_spec.judge is None:
            raise UsageError("the run records no judge; name the one to align with")
        return reviewed.run_spec.judge
    return judge if isinstance(judge, JudgeConfig) else JudgeConfig.from_dict(dict(judge))


def _kappa_or(card: dict[str, Any]) -> float:
    k = card.get("kappa", [None])[0]
    return -math.inf if k is None else float(k)


def align_baseline(store: Store, run_id: str, metric: str, *, seed: int = 0,
                   runs: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
    """The current judge's baseline card alone, with no judge call and no use of the test split (the dashboard's
    Align tab shows it before any candidate is built). Reviewed rows not yet dealt are dealt now, as :func:`align`
    would deal them.

    Returns:
        ``run_id``, ``runs``, ``metric``, ``seed``, ``splits`` (rows per split), ``baseline`` (as :func:`align`'s),
        ``test_uses`` (decisions the test split has been used for so far) and ``current_template``.
    Raises:
        UsageError: no such run or judge metric, conversations.
    """
    reviewed = _Reviewed(store, run_id, metric, seed, tuple(runs))
    judge = reviewed.run_spec.judge
    return {"run_id": run_id, "runs": [p.run_id for p in reviewed.parts], "metric": metric, "seed": seed,
            "splits": {s: len(reviewed.split(s)) for s in ("train", "dev", "test")},
            "baseline": baseline(reviewed, judge.model if judge else None, seed),
            "test_uses": store.test_split_uses(metric), "current_template": template_text(reviewed.template)}


def _selected_template(reviewed: _Reviewed, alignment: dict[str, Any]) -> Template:
    """The gated candidate of ``alignment`` as the Template the gate judged with (the same text, so the same cache
    keys: the rows dev and test judged are not asked again), rebuilt on the run's current template."""
    chosen = next(c for c in alignment["candidates"] if c["method"] == alignment["selected"])
    current = reviewed.template
    cand = chosen["template"]
    # with_section puts the section after the system text, or (no system text) before the user text
    if current.system is not None:
        text = current.system
        head, tail = f"[system]\n{text}\n\n", f"\n[user]\n{current.user}"
        section = cand[len(head):len(cand) - len(tail)] if cand.startswith(head) and cand.endswith(tail) else None
    else:
        text = current.user
        section = cand[:-len(text) - 2] if cand.endswith("\n\n" + text) else None
    t = None if section is None else with_section(current, section, chosen["method"])
    if t is None or template_text(t) != cand:
        raise UsageError("the run's template is not the one this alignment was made on; align again")
    return t


def promoted_rates(store: Store, alignment: dict[str, Any], judge: JudgeConfig | dict | None = None, *,
                   api_key: str | None = None) -> dict[str, Any]:
    """After :func:`promote`: the run's corrected rate with the gated candidate judging every row, beside the
    current judge's, on the same reviews (:func:`rates_with`: replies already cached are not asked again), and the
    length bias measured again with the candidate (``length_bias``, as the baseline card's).

    Args:
        alignment: what :func:`align` returned (its gate said "better").
        judge: the judge the alignment used (default: the run's own); ``api_key`` its key.
    """
    reviewed = _Reviewed(store, alignment["run_id"], alignment["metric"], alignment["seed"],
                         tuple(alignment.get("runs", ())))
    judging = _Judging(store, alignment["run_id"], _judge_of(reviewed, judge), api_key)
    template, seed = _selected_template(reviewed, alignment), alignment["seed"]
    out = rates_with(judging, reviewed, template, seed)
    # the length bias again, with the promoted judge's values on the reviewed rows (all in the cache by now)
    got = judging.values(template, reviewed.spec, [(r.ident, r.values) for r in reviewed.rows])
    kept = [r for r in reviewed.rows if got.get(r.ident) is not None]
    out["length_bias"] = length_bias([float(snap(reviewed.spec, got[r.ident])) for r in kept],
                                     [r.human_value for r in kept], _lengths(kept), seed)
    return out
