"""WildBench's rules: how its judge's inputs are filled and how its leaderboard aggregates verdicts.

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

Pure functions: no I/O. The kinds ``wb_score`` and ``pairwise`` aggregate with them; ``evaluators.suites.wildbench``
imports published judgment files with them.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
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



# A pairwise verdict's analyses and reasons: the judge's key (WildBench's format) -> ours.
PAIR_FIELDS = {"analysis of A": "analysis_A", "analysis of B": "analysis_B", "reason of A=B": "reason_tie",
               "reason of A>B": "reason_A", "reason of B>A": "reason_B"}


def pair_reason(details: dict) -> str | None:
    """A pairwise verdict's reason as shown: each side's reason that was given ("A>B: ...", "B>A: ...", "A=B: ...")."""
    return " | ".join(f"{k}: {details[v]}" for k, v in (("A>B", "reason_A"), ("B>A", "reason_B"),
                                                        ("A=B", "reason_tie")) if details[v]) or None


def model_name(name: str) -> str:
    """Leaderboard name of a model (``openai/gpt-3.5-turbo-0125`` -> ``gpt-3.5-turbo-0125``)."""
    return str(name).split("/")[-1]



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


