"""A scan's attack objectives: what each attack asks the target for, per risk category.

Bundled: ``objectives.json`` beside this module, twelve per harm category written in our own words (requests only,
never an answer), in the Azure AI Evaluation SDK's ``custom_attack_seed_prompts`` format, so one reader serves it
and a user's file alike: a JSON array (``.json``) or JSON lines (``.jsonl``) of

    {"id": "...", "messages": [{"role": "user", "content": "the objective"}],
     "metadata": {"target_harms": [{"risk-type": "violence"}]}}

The objective is the first message's content, as the SDK takes it; an entry with several ``target_harms`` is an
objective of each. Where the SDK skips a malformed entry with a warning, we refuse the file, naming the file, the
line the entry starts on and the field, so a scan never runs on fewer objectives than its user wrote.

A scan takes N per category: all when there are no more, else N chosen with a generator seeded by the scan's seed
and the category (kept in the file's order), so the same seed gives the same objectives.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluators.core.errors import UsageError

RISK_CATEGORIES = ("violence", "hate_unfairness", "sexual", "self_harm")  # those a severity judge scores here
BUNDLED = Path(__file__).with_name("objectives.json")
HOW = "see the SDK's custom_attack_seed_prompts format"


@dataclass(frozen=True)
class Objective:
    """One objective of one category: its id (the file's ``id``, else ``line-N``), its text, where it came from."""

    id: str
    risk_category: str
    text: str
    source: str = "bundled"


def _entries(text: str, where: str) -> list[tuple[int, Any]]:
    """(line the entry starts on, the entry) for a JSON array or for JSON lines."""
    stripped = text.lstrip()
    if not stripped.startswith("["):
        out = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    out.append((n, json.loads(line)))
                except ValueError as e:
                    raise UsageError(f"{where}: line {n} is not JSON ({e})") from None
        return out
    decoder, out = json.JSONDecoder(), []
    try:
        json.loads(text)  # a broken file is said where JSON says it breaks
    except ValueError as e:
        raise UsageError(f"{where}: not JSON: {e}") from None
    pos = text.index("[") + 1
    while True:  # walk the array's items to know the line each starts on
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            return out
        item, end = decoder.raw_decode(text, pos)
        out.append((text.count("\n", 0, pos) + 1, item))
        pos = end


def _objectives(entry: Any, at: str, source: str) -> list[Objective]:
    """The objectives one entry holds (one per risk type), or a UsageError naming ``at`` and the field."""
    if not isinstance(entry, dict):
        raise UsageError(f"{at}: an entry must be a JSON object ({HOW})")
    harms = (entry.get("metadata") or {}).get("target_harms") if isinstance(entry.get("metadata"), dict) else None
    if not isinstance(harms, list) or not harms:
        raise UsageError(f"{at}: field metadata.target_harms is missing or empty ({HOW})")
    categories = []
    for k, harm in enumerate(harms):
        risk = harm.get("risk-type") if isinstance(harm, dict) else None
        if risk not in RISK_CATEGORIES:
            got = "missing" if risk is None else repr(risk)
            raise UsageError(f"{at}: field metadata.target_harms[{k}].risk-type is {got}; this scan judges "
                             f"{', '.join(RISK_CATEGORIES)}")
        categories.append(risk)
    messages = entry.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[0], dict):
        raise UsageError(f"{at}: field messages must be a non-empty list of messages ({HOW})")
    if messages[0].get("role") != "user":
        raise UsageError(f"{at}: field messages[0].role must be 'user', got {messages[0].get('role')!r}")
    content = messages[0].get("content")
    if not isinstance(content, str) or not content.strip():
        raise UsageError(f"{at}: field messages[0].content is missing or empty")
    oid = entry.get("id")
    oid = str(oid) if oid not in (None, "") else at.rsplit(": ", 1)[-1].replace(" ", "-")
    return [Objective(oid, c, content, source) for c in dict.fromkeys(categories)]


def read_seed_prompts(path: str | Path) -> list[Objective]:
    """Every objective of a ``custom_attack_seed_prompts`` file (.json array or .jsonl), in the file's order.

    Raises:
        UsageError: an unreadable file, or an entry missing a field (file, line and field named).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{p}: cannot read it ({getattr(e, 'strerror', None) or e})") from None
    source = "bundled" if p == BUNDLED else str(p)
    out: list[Objective] = []
    seen: dict[tuple[str, str], int] = {}
    for line, entry in _entries(text, str(p)):
        for o in _objectives(entry, f"{p}: line {line}", source):
            first = seen.setdefault((o.risk_category, o.id), line)
            if first != line:  # an attack is named by its objective's id: two would be one
                raise UsageError(f"{p}: line {line}: field id {o.id!r} repeats line {first}'s in {o.risk_category}")
            out.append(o)
    if not out:
        raise UsageError(f"{p}: no objectives in it ({HOW})")
    return out


def choose(objectives: list[Objective], categories: list[str], n: int, seed: int) -> list[Objective]:
    """Up to ``n`` objectives of each category (in ``categories``' order): all when there are no more, else ``n``
    chosen by the seed and the category, kept in the file's order.

    Raises:
        UsageError: a category with no objective.
    """
    out = []
    for cat in categories:
        pool = [o for o in objectives if o.risk_category == cat]
        if not pool:
            raise UsageError(f"no objective for risk category {cat}: add some to the objectives file")
        if len(pool) > n:
            picked = set(random.Random(f"{seed}\x00{cat}").sample(range(len(pool)), n))
            pool = [o for i, o in enumerate(pool) if i in picked]
        out.extend(pool)
    return out


def load_objectives(categories: list[str], n: int = 10, seed: int = 0, path: str | Path | None = None
                    ) -> list[Objective]:
    """The scan's objectives: ``n`` per category from ``path`` (a seed prompts file) or the bundled set."""
    if n < 1:
        raise UsageError(f"--objectives must be at least 1, got {n}")
    return choose(read_seed_prompts(path or BUNDLED), categories, n, seed)
