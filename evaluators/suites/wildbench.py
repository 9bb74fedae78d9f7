"""WildBench: filling the judge's inputs, the leaderboard's aggregates, and import of published judgments.

The aggregates follow WildBench's leaderboard code (``leaderboard/data_dir/_create_tables.py`` in
allenai/WildBench):

- ``WB_score`` = (mean 1-10 score - 5) x 2 x 10 over every scored record.
- Task tags: a record counts toward every group among its primary and secondary tags (12 tags fold
  into 5 groups). Category scores leave out empty and truncated responses; ``WB_score.task_macro`` is
  the weighted sum of the category scores divided by the sum of *all five* weights (4.75), so a
  category with no records adds nothing but still counts in the denominator, as upstream.
- ``WB_reward`` (x100) = mean reward for the tested model: win much +1, win +0.5, tie 0, lose -0.5,
  lose much -1, over *every* record; a pair where either response is empty or truncated counts 0
  (it is left out of the win/tie/loss counts but stays in the denominator, as upstream).
- Length rule (K characters, -1 disables): a slight win (or loss) becomes a tie when the winner's
  response is longer than the loser's by more than K characters. Clear wins are never changed.

No I/O beyond reading the files given to :func:`read_eval_file`; no Streamlit.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

# ---------------------------------------------------------------- filling the judge's inputs
MAX_WORDS = 1000  # WildBench judges see at most this many (space-separated) words of a response
TRUNCATED = "... (truncated)"
EMPTY = "[This model response is empty.]"

# The 12 WildBench task tags and the 5 groups the leaderboard reports.
TAG_GROUPS = {
    "Information seeking": "Information/Advice seeking",
    "Creative Writing": "Creative Tasks",
    "Coding & Debugging": "Coding & Debugging",
    "Reasoning": "Planning & Reasoning",
    "Editing": "Creative Tasks",
    "Math": "Math & Data Analysis",
    "Planning": "Planning & Reasoning",
    "Brainstorming": "Creative Tasks",
    "Role playing": "Creative Tasks",
    "Advice seeking": "Information/Advice seeking",
    "Data Analysis": "Math & Data Analysis",
    "Others": "Creative Tasks",
}
# Weights of the task macro (leaderboard code); the macro divides by their sum, 4.75.
GROUP_WEIGHTS = {
    "Creative Tasks": 0.5,
    "Planning & Reasoning": 1.25,
    "Math & Data Analysis": 1.0,
    "Information/Advice seeking": 0.75,
    "Coding & Debugging": 1.25,
}
GROUPS = tuple(GROUP_WEIGHTS)
LABEL_REWARD = {"A++": 100, "A+": 50, "A=B": 0, "B+": -50, "B++": -100}  # for the response shown as A
DEFAULT_LENGTH_PENALTY = 500
BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 20240522  # fixed, so every interval is reproducible


def shorten(text: str, max_words: int = MAX_WORDS) -> str:
    """Cut ``text`` to ``max_words`` space-separated words plus WildBench's truncation marker."""
    words = text.split(" ")
    if max_words > 0 and len(words) > max_words:
        return " ".join(words[:max_words]) + TRUNCATED
    return text


def shown_response(text: str | None) -> str:
    """A response as a WildBench judge sees it: cut to 1,000 words; an empty one as an explicit marker."""
    text = shorten(text or "")
    return EMPTY if not text.strip() else text


def history_text(messages: Sequence[dict]) -> str:
    """Earlier turns as WildBench writes them: ``USER: ...`` / ``ASSISTANT: ...`` blocks, each followed
    by a blank line (other roles are left out, as upstream)."""
    out = []
    for m in messages:
        role = m.get("role")
        if role in ("user", "assistant"):
            out.append(f"{role.upper()}: {m.get('content') or ''}\n\n")
    return "".join(out)


def checklist_text(items: Iterable[str] | None) -> str:
    """One ``- item`` line per checklist item."""
    return "".join(f"- {x}\n" for x in items or [])


def split_conversation(messages: Sequence[dict]) -> tuple[str, str | None]:
    """(history, query): the last user turn is the query, every message before it the history."""
    last = max((k for k, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"), default=None)
    if last is None:
        return history_text(messages), None
    return history_text(messages[:last]), messages[last].get("content") or ""


def conversation_of(record: dict, query: str | None = None) -> tuple[str, str | None]:
    """(history, query) of a WildBench row: ``conversation_input`` or ``messages`` (OpenAI style), else
    ``history`` (text, or a list of messages) plus the query (``user_query``)."""
    for col in ("conversation_input", "messages"):
        conv = record.get(col)
        if isinstance(conv, str) and conv[:1] == "[":
            try:
                conv = json.loads(conv)
            except ValueError:
                pass
        if isinstance(conv, list) and conv:
            return split_conversation(conv)
    hist = record.get("history")
    if isinstance(hist, list):
        hist = history_text(hist)
    return (hist or ""), (query if query is not None else record.get("user_query"))


def task_groups(primary: str | None, secondary: Iterable[str] | None) -> list[str]:
    """The groups a row counts toward (its primary and secondary tags folded, deduplicated, in
    :data:`GROUPS` order); unknown tags are ignored."""
    tags = ([primary] if primary else []) + list(secondary or [])
    hit = {TAG_GROUPS[t] for t in tags if t in TAG_GROUPS}
    return [g for g in GROUPS if g in hit]


def tags_of(record: dict) -> list[str] | None:
    """Task groups of a row, or None when the row carries no tags."""
    primary, secondary = record.get("primary_tag"), record.get("secondary_tags")
    if isinstance(secondary, str):
        try:
            secondary = json.loads(secondary)
        except ValueError:
            secondary = [secondary]
    if not primary and not secondary:
        return None
    return task_groups(primary, secondary if isinstance(secondary, list) else None)


def is_excluded(text: str | None) -> bool:
    """Empty or truncated: left out of category scores and win/tie/loss counts (leaderboard rule)."""
    text = text or ""
    return text == "" or text == EMPTY or text.endswith(TRUNCATED)


# ---------------------------------------------------------------- the length rule
def length_rule(reward: float, len_a: int, len_b: int, k: int = DEFAULT_LENGTH_PENALTY) -> float:
    """Reward for A after the length rule: a slight win (+50) or loss (-50) becomes a tie (0) when the
    winner's response is longer than the loser's by more than ``k`` characters; ``k < 0`` disables it."""
    if k < 0:
        return reward
    if reward == 50 and len_a > len_b + k:
        return 0
    if reward == -50 and len_b > len_a + k:
        return 0
    return reward


def consistent(r_ab: float, r_ba: float) -> tuple[float, bool]:
    """The order-consistent reward for A from both orders (both already for A), and whether it flipped.

    A flip (one order prefers A, the other B) counts as a tie; otherwise the milder verdict stands,
    the one both orders support (A++ and A+ give A+; A+ and A=B give A=B).
    """
    if r_ab * r_ba < 0:
        return 0, True
    return (r_ab if abs(r_ab) <= abs(r_ba) else r_ba), False


# ---------------------------------------------------------------- bootstrap
def _rng_index(n: int, samples: int, seed: int):
    import numpy as np

    return np.random.default_rng(seed).integers(0, n, size=(samples, n))


def _pct(values) -> list[float | None]:
    import numpy as np

    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return [None, None]
    lo, hi = np.percentile(values, [2.5, 97.5])
    return [float(lo), float(hi)]


def bootstrap_mean(values: Sequence[float], samples: int = BOOTSTRAP_SAMPLES,
                   seed: int = BOOTSTRAP_SEED) -> list[float | None]:
    """95% bootstrap interval of a mean (e.g. the share of pairs whose verdict flips)."""
    import numpy as np

    if len(values) < 2:
        return [None, None]
    v = np.asarray(values, dtype=float)
    return _pct(v[_rng_index(len(v), samples, seed)].mean(axis=1))


# ---------------------------------------------------------------- score aggregates
@dataclass
class ScoreRow:
    """One scored response: its 1-10 score, the response text's length, whether it is empty or
    truncated, and its task groups (None when the data has no tags)."""

    score: float
    length: int
    excluded: bool
    groups: list[str] | None = None


def _adjust(mean: float) -> float:
    return (mean - 5) * 2 * 10


def score_aggregates(rows: Sequence[ScoreRow], samples: int = BOOTSTRAP_SAMPLES,
                     seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """WB-Score aggregates of one model, as the leaderboard computes them, with 95% bootstrap intervals.

    Returns:
        ``records``, ``score`` (mean 1-10), ``WB_score`` with ``WB_score_ci95``, ``Length`` (mean
        characters of non-empty, untruncated responses), and when rows carry tags
        ``WB_score.<group>`` per group (with ``_ci95``) and ``WB_score.task_macro`` (with ``_ci95``).
    """
    import numpy as np

    n = len(rows)
    out: dict[str, Any] = {"records": n}
    if n == 0:
        return out | {"score": None, "WB_score": None, "WB_score_ci95": [None, None], "Length": None}
    s = np.array([r.score for r in rows], dtype=float)
    mean = math.fsum(s) / n
    out["score"] = mean
    out["WB_score"] = _adjust(mean)
    idx = _rng_index(n, samples, seed)
    out["WB_score_ci95"] = _pct(_adjust(s[idx].mean(axis=1))) if n > 1 else [None, None]
    kept = [r.length for r in rows if not r.excluded]
    out["Length"] = math.fsum(kept) / len(kept) if kept else None
    if all(r.groups is None for r in rows):
        return out
    incl = np.array([not r.excluded and r.groups is not None for r in rows])
    member = {g: incl & np.array([bool(r.groups) and g in r.groups for r in rows]) for g in GROUPS}
    macro = 0.0
    macro_boot = np.zeros(samples)
    for g in GROUPS:
        w = member[g].astype(float)
        cnt = w.sum()
        if cnt == 0:
            out[f"WB_score.{g}"], out[f"WB_score.{g}_ci95"] = None, [None, None]
            continue
        cat = _adjust(math.fsum(s[member[g]]) / cnt)
        out[f"WB_score.{g}"] = cat
        bs_cnt = w[idx].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = _adjust((s * w)[idx].sum(axis=1) / bs_cnt)
        out[f"WB_score.{g}_ci95"] = _pct(boot)
        macro += cat * GROUP_WEIGHTS[g]
        macro_boot += np.nan_to_num(boot) * GROUP_WEIGHTS[g]
    total_w = sum(GROUP_WEIGHTS.values())
    out["WB_score.task_macro"] = macro / total_w
    out["WB_score.task_macro_ci95"] = _pct(macro_boot / total_w)
    return out


# ---------------------------------------------------------------- pairwise aggregates
@dataclass
class PairRow:
    """One judged pair from the tested model's side: its reward *before* the length rule (+100, +50,
    0, -50, -100), both response lengths, whether either response is empty or truncated, groups."""

    reward: float
    len_test: int
    len_ref: int
    excluded: bool = False
    groups: list[str] | None = None


OUTCOMES = ("win_much", "win", "tie", "lose", "lose_much")
_OUTCOME = {100: "win_much", 50: "win", 0: "tie", -50: "lose", -100: "lose_much"}
_VALUE = {"win_much": 1.0, "win": 0.5, "tie": 0.0, "lose": -0.5, "lose_much": -1.0}


def reward_from_counts(counts: dict[str, int], total: int) -> float:
    """WB-Reward (x100) from win/tie/loss counts over ``total`` records (the leaderboard's formula)."""
    return 100 * math.fsum(_VALUE[k] * counts.get(k, 0) for k in OUTCOMES) / total


def task_macro(values: dict[str, float]) -> float:
    """Weighted task macro of per-group values (missing groups add nothing; divided by 4.75)."""
    return math.fsum(values[g] * GROUP_WEIGHTS[g] for g in values) / sum(GROUP_WEIGHTS.values())


def pairwise_aggregates(rows: Sequence[PairRow], k: int = DEFAULT_LENGTH_PENALTY,
                        samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """WB-Reward of a tested model against one reference, as the leaderboard computes it.

    Returns:
        ``records``, ``K``, counts ``win_much`` .. ``lose_much``, ``WB_reward`` (x100) with
        ``WB_reward_ci95``, ``Length`` (mean characters of the tested responses counted), and with tags
        ``WB_reward.<group>`` and ``WB_reward.task_macro`` (with intervals).
    """
    import numpy as np

    n = len(rows)
    out: dict[str, Any] = {"records": n, "K": k, **{o: 0 for o in OUTCOMES}}
    if n == 0:
        return out | {"WB_reward": None, "WB_reward_ci95": [None, None], "Length": None}
    final = np.zeros(n)
    counted = np.zeros(n, dtype=bool)
    lengths = []
    for j, r in enumerate(rows):
        if r.excluded:
            continue
        v = length_rule(r.reward, r.len_test, r.len_ref, k)
        out[_OUTCOME[int(v)]] += 1
        final[j], counted[j] = v, True
        lengths.append(r.len_test)
    out["WB_reward"] = float(final.sum() / n)
    idx = _rng_index(n, samples, seed)
    out["WB_reward_ci95"] = _pct(final[idx].mean(axis=1)) if n > 1 else [None, None]
    out["Length"] = math.fsum(lengths) / len(lengths) if lengths else None
    if all(r.groups is None for r in rows):
        return out
    macro, macro_boot = 0.0, np.zeros(samples)
    for g in GROUPS:
        w = (counted & np.array([bool(r.groups) and g in r.groups for r in rows])).astype(float)
        if w.sum() == 0:
            out[f"WB_reward.{g}"], out[f"WB_reward.{g}_ci95"] = None, [None, None]
            continue
        cat = float((final * w).sum() / w.sum())
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = (final * w)[idx].sum(axis=1) / w[idx].sum(axis=1)
        out[f"WB_reward.{g}"], out[f"WB_reward.{g}_ci95"] = cat, _pct(boot)
        macro += cat * GROUP_WEIGHTS[g]
        macro_boot += np.nan_to_num(boot) * GROUP_WEIGHTS[g]
    out["WB_reward.task_macro"] = macro / sum(GROUP_WEIGHTS.values())
    out["WB_reward.task_macro_ci95"] = _pct(macro_boot / sum(GROUP_WEIGHTS.values()))
    return out


def mixture(per_reference: dict[str, Sequence[PairRow]], k: int = DEFAULT_LENGTH_PENALTY,
            samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """Rewards against several reference models and their mixture (the mean over references).

    Returns:
        ``references`` (reference -> :func:`pairwise_aggregates`), ``mixture_of_rewards`` with
        ``mixture_of_rewards_ci95`` (each reference resampled on its own, then averaged) and, when every
        reference has one, ``task_macro_reward`` (the mean of their task macros).
    """
    import numpy as np

    refs = {ref: pairwise_aggregates(rows, k, samples, seed) for ref, rows in sorted(per_reference.items())}
    out: dict[str, Any] = {"references": refs}
    vals = [a["WB_reward"] for a in refs.values() if a["WB_reward"] is not None]
    out["mixture_of_rewards"] = math.fsum(vals) / len(vals) if vals else None
    boots = []
    for ref, rows in sorted(per_reference.items()):
        n = len(rows)
        if n < 2:
            continue
        final = np.array([0.0 if r.excluded else length_rule(r.reward, r.len_test, r.len_ref, k) for r in rows])
        boots.append(final[_rng_index(n, samples, seed)].mean(axis=1))
    out["mixture_of_rewards_ci95"] = _pct(np.mean(boots, axis=0)) if boots and len(boots) == len(refs) else [None, None]
    macros = [a.get("WB_reward.task_macro") for a in refs.values()]
    if macros and all(m is not None for m in macros):
        out["task_macro_reward"] = math.fsum(macros) / len(macros)
    return out


# ---------------------------------------------------------------- published eval-result files
class ImportFormatError(ValueError):
    """A file is not a WildBench eval-result file; the message names file, record and field."""


@dataclass
class EvalFile:
    """One WildBench eval-result file, read and checked."""

    path: str
    mode: str  # "score" | "pairwise"
    records: list[dict]
    judge: str | None = None
    problems: list[str] = field(default_factory=list)


def model_name(name: str) -> str:
    """Leaderboard name of a model (``openai/gpt-3.5-turbo-0125`` -> ``gpt-3.5-turbo-0125``)."""
    return str(name).split("/")[-1]


def _judge_from_path(path: Path) -> str | None:
    for part in path.parts:
        if part.startswith("eval="):
            return part[5:]
    return None


def read_eval_file(path: str | Path) -> EvalFile:
    """Read a WildBench eval-result file (a JSON array, or JSON lines) and tell its mode.

    Score records need ``session_id``, ``model_test``, ``score`` and ``model_output``; pairwise records
    ``session_id``, ``model_A``, ``model_B``, ``winner``, ``extent`` and ``model_outputs``.

    Raises:
        ImportFormatError: unreadable file, or a record lacking a field (file, record and field named).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ImportFormatError(f"{p}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise ImportFormatError(f"{p}: not UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError as e:
            raise ImportFormatError(f"{p}: neither a JSON array nor JSON lines ({e})") from None
    if not isinstance(data, list) or not data:
        raise ImportFormatError(f"{p}: expected a non-empty array of records")
    first = data[0] if isinstance(data[0], dict) else {}
    mode = "pairwise" if "model_outputs" in first or "winner" in first else "score"
    need = (("session_id", "model_A", "model_B", "winner", "extent", "model_outputs") if mode == "pairwise"
            else ("session_id", "model_test", "score", "model_output"))
    for k, rec in enumerate(data, 1):
        if not isinstance(rec, dict):
            raise ImportFormatError(f"{p}: record {k} is not an object")
        missing = [f for f in need if f not in rec]
        if missing:
            raise ImportFormatError(f"{p}: record {k} ({rec.get('session_id', '?')}) lacks {', '.join(missing)}")
        if mode == "score":
            try:
                score = float(rec["score"])
            except (TypeError, ValueError):
                raise ImportFormatError(f"{p}: record {k}, field score: {rec['score']!r} is not a number") from None
            if not 1 <= score <= 10:
                raise ImportFormatError(f"{p}: record {k}, field score: {score:g} is outside 1-10")
        else:
            outs = rec["model_outputs"]
            if not isinstance(outs, dict) or rec["model_A"] not in outs or rec["model_B"] not in outs:
                raise ImportFormatError(f"{p}: record {k}, field model_outputs: needs the texts of model_A and model_B")
            if rec["winner"] not in (rec["model_A"], rec["model_B"], "tie") or rec["extent"] not in (0, 1, 2):
                raise ImportFormatError(f"{p}: record {k}, fields winner/extent: {rec['winner']!r}/{rec['extent']!r} "
                                        "is not a verdict (winner model_A, model_B or tie; extent 0, 1 or 2)")
    return EvalFile(str(p), mode, data, _judge_from_path(p))


def pair_label(rec: dict) -> str:
    """A pairwise record's verdict as the judge's label (A = ``model_A``)."""
    if rec["winner"] == "tie" or rec["extent"] == 0:
        return "A=B"
    side = "A" if rec["winner"] == rec["model_A"] else "B"
    return side + "+" * int(rec["extent"])


def parsed_text(parsed: Any, key: str) -> str | None:
    if isinstance(parsed, str):
        try:
            parsed = json.loads(parsed)
        except ValueError:
            import ast

            try:
                parsed = ast.literal_eval(parsed)
            except (ValueError, SyntaxError):
                return None
    v = parsed.get(key) if isinstance(parsed, dict) else None
    return None if v is None else (v if isinstance(v, str) else json.dumps(v))


# ---------------------------------------------------------------- from stored results
def score_rows_from_cells(cells: Iterable[Any], primary: str = "wildbench_score") -> list[ScoreRow]:
    """Scored cells of a ``wb_score`` metric -> :class:`ScoreRow` (facts stored with each verdict)."""
    return [ScoreRow(float(c.outputs[primary]), int(c.outputs.get("length") or 0), bool(c.outputs.get("excluded")),
                     c.outputs.get("groups")) for c in cells]


def pair_rows_from_cells(cells: Iterable[Any]) -> dict[str, list[PairRow]]:
    """Scored cells of a ``pairwise`` metric -> reference model (``model_B``) -> :class:`PairRow` for model A."""
    out: dict[str, list[PairRow]] = {}
    for c in cells:
        o = c.outputs
        out.setdefault(str(o.get("model_B") or "B"), []).append(
            PairRow(float(o["reward_before_length_rule"]), int(o.get("len_A") or 0), int(o.get("len_B") or 0),
                    bool(o.get("excluded")), o.get("groups")))
    return out


def leaderboard(results: Sequence[Any], length_penalty: int | None = None,
                default_models: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Per model aggregates over runs' WildBench metrics (:class:`evaluators.read.results.RunResults`).

    Rows of one model from several runs are pooled (so several pairwise runs against different
    references give that model's mixture of rewards).

    Args:
        results: the runs' results.
        length_penalty: K for pairwise rewards; None uses each run's own (metric param).
        default_models: per run, the name for rows that do not name their model (default: "model").
    Returns:
        model -> {``WB_score``, ``WB_score_ci95``, ``records``, ``Length``, category scores ..} from
        ``wb_score`` metrics, and {``rewards`` (reference -> ``WB_reward``, counts ..),
        ``mixture_of_rewards`` (+ ``_ci95``), ``task_macro_reward``, ``pairwise_records``} from
        ``pairwise`` metrics (the model is ``model`` / ``model_A``).
    """
    scores: dict[str, list[ScoreRow]] = {}
    pairs: dict[int, dict[str, dict[str, list[PairRow]]]] = {}  # K -> model -> reference -> rows
    for n, res in enumerate(results):
        fallback = (default_models[n] if default_models else None) or "model"
        for spec in res.specs:
            ok = [c for c in res.cells[spec.name] if c and c.status == "ok"]
            if spec.kind == "wb_score":
                for c in ok:
                    scores.setdefault(str(c.outputs.get("model") or fallback), []).extend(
                        score_rows_from_cells([c], spec.primary))
            elif spec.kind == "pairwise":
                k = int(length_penalty if length_penalty is not None
                        else dict(spec.params).get("length_penalty", DEFAULT_LENGTH_PENALTY))
                for c in ok:
                    model = str(c.outputs.get("model_A") or fallback)
                    for ref, rows in pair_rows_from_cells([c]).items():
                        pairs.setdefault(k, {}).setdefault(model, {}).setdefault(ref, []).extend(rows)
    board: dict[str, dict[str, Any]] = {}
    for model, rows in scores.items():
        board.setdefault(model, {}).update(score_aggregates(rows))
    for k, models in pairs.items():
        for model, by_ref in models.items():
            mix = mixture(by_ref, k)
            entry = board.setdefault(model, {})
            entry.update({"pairwise_K": k, "rewards": mix["references"], "mixture_of_rewards": mix["mixture_of_rewards"],
                          "mixture_of_rewards_ci95": mix["mixture_of_rewards_ci95"],
                          "pairwise_records": sum(len(r) for r in by_ref.values())})
            if "task_macro_reward" in mix:
                entry["task_macro_reward"] = mix["task_macro_reward"]
    return board


# ---------------------------------------------------------------- import as runs
@dataclass
class ImportedRun:
    run_id: str
    path: str
    mode: str
    model: str
    records: int
    reference: str | None = None
    reused: bool = False


def _reference_of(ef: EvalFile) -> tuple[str, str]:
    """(tested model, reference model) of a pairwise file: the reference is named by a ``ref=NAME``
    folder (WildBench's layout), else the tested model by the file's name."""
    names = {rec["model_A"] for rec in ef.records} | {rec["model_B"] for rec in ef.records}
    p = Path(ef.path)
    ref = next((part[4:] for part in p.parts if part.startswith("ref=")), None)
    if ref is not None:
        hits = [n for n in names if model_name(n) == model_name(ref)]
        tested = [n for n in names if model_name(n) != model_name(ref)]
        if hits and len(set(map(model_name, tested))) == 1:
            return tested[0], hits[0]
    stem = [n for n in names if model_name(n) == p.stem]
    others = [n for n in names if model_name(n) != p.stem]
    if stem and len(set(map(model_name, others))) == 1:
        return stem[0], others[0]
    raise ImportFormatError(f"{p}: cannot tell the tested model from the reference among {', '.join(sorted(names))}; "
                            "keep the file under a ref=<reference> folder or name it <tested model>.json")


def import_file(store: Any, path: str | Path, length_penalty: int = DEFAULT_LENGTH_PENALTY) -> ImportedRun:
    """Store one WildBench eval-result file as a completed run (dataset + per-row results), once.

    Score records become ``wildbench_score`` results; pairwise records ``wildbench_pairwise`` results
    oriented so that model A is the tested model (a record where the judge saw the tested model as B
    is stored as the swapped order, turn 1, with the judge's label as given).

    Raises:
        ImportFormatError: see :func:`read_eval_file`.
    """
    import hashlib

    from evaluators.data.dataset import Dataset
    from evaluators.judge.client import JudgeConfig
    from evaluators.core.registry import get_metric, spec_fingerprint
    from evaluators.run.runner import RunSpec
    from evaluators.store.store import Result, utcnow

    ef = read_eval_file(path)
    sha = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    metric = "wildbench_score" if ef.mode == "score" else "wildbench_pairwise"
    options = {} if ef.mode == "score" else {metric: {"length_penalty": int(length_penalty)}}
    spec = get_metric(metric).with_params(options.get(metric))
    records, results = [], []
    reference = None
    if ef.mode == "score":
        model = model_name(ef.records[0]["model_test"])
        for i, rec in enumerate(ef.records):
            out = rec["model_output"] or ""
            parsed = rec.get("parsed_result")
            row = {"session_id": rec["session_id"], "model": model_name(rec["model_test"]), "model_output": out}
            for extra in ("checklist", "primary_tag", "secondary_tags"):
                if extra in rec:
                    row[extra] = rec[extra]
            records.append(row)
            score = float(rec["score"])
            strengths, weaknesses = parsed_text(parsed, "strengths"), parsed_text(parsed, "weaknesses")
            reason = "\n".join(x for x in (strengths and f"Strengths: {strengths}",
                                           weaknesses and f"Weaknesses: {weaknesses}") if x) or None
            outputs = {"wildbench_score": score, "wildbench_score_strengths": strengths,
                       "wildbench_score_weaknesses": weaknesses, "model": row["model"], "length": len(out),
                       "excluded": is_excluded(out), "groups": tags_of(rec)}
            results.append(Result(i, metric, 0, "ok", value=score, outputs=outputs, reason=reason,
                                  raw=parsed if isinstance(parsed, str) else json.dumps(parsed, ensure_ascii=False),
                                  meta={"signature": spec.signature(), "model": ef.judge, "imported_from": str(path)}))
        mapping = {"response": "model_output"}
    else:
        tested, ref = _reference_of(ef)
        model, reference = model_name(tested), model_name(ref)
        for i, rec in enumerate(ef.records):
            outs = rec["model_outputs"]
            a, b = outs.get(tested, ""), outs.get(ref, "")
            records.append({"session_id": rec["session_id"], "model_A": model, "model_B": reference,
                            "candidate_A": a, "candidate_B": b,
                            **{k: rec[k] for k in ("checklist", "primary_tag", "secondary_tags") if k in rec}})
            label = pair_label(rec)
            turn = 0 if rec["model_A"] == tested else 1
            parsed = rec.get("parsed_result")
            details = {"analysis_A": parsed_text(parsed, "analysis of A"), "analysis_B": parsed_text(parsed, "analysis of B"),
                       "reason_tie": parsed_text(parsed, "reason of A=B"), "reason_A": parsed_text(parsed, "reason of A>B"),
                       "reason_B": parsed_text(parsed, "reason of B>A")}
            reason = " | ".join(f"{k}: {details[v]}" for k, v in (("A>B", "reason_A"), ("B>A", "reason_B"),
                                                                   ("A=B", "reason_tie")) if details[v]) or None
            outputs = {"wildbench_pairwise_reward": float(LABEL_REWARD[label]), "choice": label, **details,
                       "model_A": model, "model_B": reference, "len_A": len(a), "len_B": len(b),
                       "excluded": is_excluded(a) or is_excluded(b), "groups": tags_of(rec)}
            results.append(Result(i, metric, turn, "ok", value=float(LABEL_REWARD[label]), outputs=outputs,
                                  reason=reason, raw=None if parsed is None else json.dumps(parsed, ensure_ascii=False),
                                  meta={"signature": spec.signature(), "model": ef.judge, "imported_from": str(path)}))
        mapping = {"response": "candidate_A"}
    name = Path(path).name
    ds = Dataset(name=f"WildBench {ef.mode}: {model}" + (f" vs {reference}" if reference else ""),
                 records=records, columns=list(dict.fromkeys(c for r in records for c in r)), mapping=mapping,
                 shape="single", source=name, detected="wildbench", row_numbers=list(range(1, len(records) + 1)))
    dataset_id = store.save_dataset(ds)
    for run in store.list_runs(dataset_id):
        if (run["spec"].get("imported") or {}).get("sha256") == sha:
            if options:  # the same judgments; only K may change, and it applies at read time
                store.update_run(run["id"], spec={**run["spec"], "options": options})
            return ImportedRun(run["id"], str(path), ef.mode, model, len(records), reference, reused=True)
    rspec = RunSpec([metric], judge=JudgeConfig(model=ef.judge or "unknown judge"), options=options)
    spec_dict = {**rspec.to_dict(), "imported": {"file": str(path), "sha256": sha, "judge": ef.judge}}
    label = f"WildBench {ef.mode} · {model}" + (f" vs {reference}" if reference else "") + \
        f" · judge {ef.judge or '?'} (imported)"
    rid = store.create_run(dataset_id, spec_dict, spec_fingerprint(spec_dict), label)
    store.write_results(rid, results)
    now = utcnow()
    store.update_run(rid, status="completed", started_at=now, finished_at=now, tasks_total=len(results),
                     tasks_done=len(results))
    return ImportedRun(rid, str(path), ef.mode, model, len(records), reference)


def import_files(store: Any, paths: Sequence[str | Path], length_penalty: int = DEFAULT_LENGTH_PENALTY
                 ) -> tuple[list[ImportedRun], dict[str, dict[str, Any]]]:
    """Import several files (all are read and checked before any is stored) and build the leaderboard.

    Returns:
        (the runs, model -> aggregates) where aggregates hold ``WB_score``, ``records`` .. from score
        files and ``rewards`` (reference -> ``WB_reward`` ..), ``mixture_of_rewards`` from pairwise files.
    """
    from evaluators.api import open_results

    for p in paths:
        ef = read_eval_file(p)  # fail before storing anything
        if ef.mode == "pairwise":
            _reference_of(ef)
    runs = [import_file(store, p, length_penalty) for p in paths]
    board = leaderboard([open_results(store, r.run_id) for r in runs], length_penalty)
    return runs, board
