"""Alignment's candidates: the current judge template with a section of rules distilled from reviewers' notes, of
worked examples, or of both, built from train rows only.

Every builder here takes rows and refuses any that is not a train row (:func:`train_only`), so no dev or test row's
text can reach a candidate's template or its provenance, whatever the caller passes. A candidate keeps the current
template whole (every placeholder it had, no new one) and adds its section to the system message, or before the
user message's text when there is no system message.
"""
from __future__ import annotations

import dataclasses
import hashlib
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluators.core.errors import UsageError
from evaluators.core.replies import ReplyError, answer_body, objects_with
from evaluators.judge.templates import Template

PROPOSER_PROMPT = Path(__file__).parent / "prompts" / "align_rules.md"
MAX_RULES = 5
EXAMPLES_PER_VERDICT = 3
FIELD_CHARS = 1500  # an example's field or a case's text is cut here: a section teaches, it does not copy a document
METHODS = ("rules", "examples", "both")
RULES_HEADER = "Rules your reviewers apply (follow them; where they conflict with the guidance above, they win):"
EXAMPLES_HEADER = "Answers your reviewers judged (judge new answers as they did):"


@dataclass
class AlignRow:
    """One reviewed row: its key, split, the people's and the current judge's verdicts, its text and notes."""

    run_id: str
    row_idx: int
    split: str  # train | dev | test
    human: int  # 1 pass, 0 fail (the reviewers' consensus)
    judge: int  # the current judge's verdict
    human_value: float
    judge_value: float
    values: dict[str, Any]  # the fields the template is filled with
    notes: list[str] = field(default_factory=list)

    @property
    def key(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "row_idx": self.row_idx}

    @property
    def ident(self) -> tuple[str, int]:
        return self.run_id, self.row_idx


@dataclass
class Candidate:
    """A draft next version of the metric's template, and where each of its parts came from."""

    method: str
    template: Template
    text: str  # the template as text ([system] / [user] sections)
    metric_text: str | None = None  # the metric file it would be saved as (:func:`draft_metric`)
    rules: list[dict[str, Any]] = field(default_factory=list)  # {"rule", "rows": [{"run_id", "row_idx"}]}
    examples: list[dict[str, Any]] = field(default_factory=list)  # {"run_id", "row_idx", "human"}


def train_only(rows: list[AlignRow]) -> list[AlignRow]:
    """``rows``, refused if any is not a train row: the one door rows pass to reach a candidate."""
    bad = [r for r in rows if r.split != "train"]
    if bad:
        raise ValueError(f"{len(bad)} {bad[0].split} row(s) handed to a candidate builder; only train rows may "
                         "shape a candidate")
    return rows


def shapers(rows: list[AlignRow], fields: list[str]) -> list[AlignRow]:
    """The train rows a candidate may learn from: every train row but those whose text (the template's fields)
    is also a dev or test row's. A dataset with a row twice would otherwise carry a held-out row's text into a
    candidate through its train copy, and the gate would grade the candidate on an answer it was shown."""
    def text(r: AlignRow) -> tuple:
        return tuple(str(r.values.get(f)) for f in fields)

    held_out = {text(r) for r in rows if r.split != "train"}
    return [r for r in rows if r.split == "train" and text(r) not in held_out]


def _safe(text: Any, limit: int = FIELD_CHARS) -> str:
    """A row's text as a section carries it: cut, and with no ``{{`` or ``{$`` a template would fill."""
    s = "" if text is None else str(text)
    s = s if len(s) <= limit else s[:limit] + " [...]"
    return s.replace("{{", "{ {").replace("}}", "} }").replace("{$", "{ $")


def _verdict_word(v: int) -> str:
    return "pass" if v else "fail"


def template_text(t: Template) -> str:
    """A template as our template form's text."""
    return f"[system]\n{t.system}\n[user]\n{t.user}" if t.system else t.user


def with_section(current: Template, section: str, method: str) -> Template:
    """``current`` with ``section`` added; its placeholders checked to be exactly the current ones."""
    if current.system is not None:
        made = dataclasses.replace(current, system=f"{current.system}\n\n{section}")
    else:
        made = dataclasses.replace(current, user=f"{section}\n\n{current.user}")
    made = dataclasses.replace(made, source=f"{current.source} (aligned: {method})",
                               sha=hashlib.sha256((current.sha + section).encode()).hexdigest()[:12])
    if made.placeholders != current.placeholders:
        raise ValueError(f"the {method} section changed the template's placeholders")
    return made


def draft_metric(definition: dict[str, Any] | None, body: str) -> str | None:
    """The metric file a candidate would become, the metric's next version: its own front matter (our template
    form) over the candidate's template. None for a built-in or a Prompty or code metric (copy it into a metric
    file of your own, in our template form, to promote a candidate of it)."""
    d = definition or {}
    if d.get("format") != "template":
        return None
    lines = str(d["text"]).replace("\r\n", "\n").split("\n")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if lines[0].strip() != "---" or end is None:
        return None
    return "\n".join(lines[:end + 1]) + "\n" + body + "\n"


def disagreements(rows: list[AlignRow]) -> list[AlignRow]:
    return [r for r in train_only(rows) if r.human != r.judge]


# ------------------------------------------------------------------------------------------------ rules
def proposer_messages(metric: str, cases: list[AlignRow], fields: list[str]) -> tuple[list[dict], dict[str, AlignRow]]:
    """The proposer's chat messages over train disagreements, and case id -> row."""
    ids = {f"C{n + 1}": r for n, r in enumerate(train_only(cases))}
    blocks = []
    for cid, r in ids.items():
        text = "\n".join(f"  {f}: {_safe(r.values.get(f))}" for f in fields if r.values.get(f) not in (None, ""))
        notes = "; ".join(_safe(n, 500) for n in r.notes) or "(no note)"
        blocks.append(f"Case {cid}\n{text}\n  grader's verdict: {_verdict_word(r.judge)}\n"
                      f"  people's verdict: {_verdict_word(r.human)}\n  people's note: {notes}")
    prompt = PROPOSER_PROMPT.read_text(encoding="utf-8")
    system, user = prompt.split("\n[user]\n", 1)
    user = (user.replace("<<metric>>", metric).replace("<<max_rules>>", str(MAX_RULES))
            .replace("<<cases>>", "\n\n".join(blocks)))
    return [{"role": "system", "content": system.removeprefix("[system]\n").strip()},
            {"role": "user", "content": user.strip()}], ids


def read_rules(reply: str, ids: dict[str, AlignRow]) -> list[dict[str, Any]]:
    """The proposer's rules, each with the rows it names; a rule naming no case given is dropped.

    Raises:
        UsageError: the reply holds no ``{"rules": [...]}`` object.
    """
    try:
        found = objects_with(answer_body(reply), "rules")
    except ReplyError:
        found = []
    if not found or not isinstance(found[-1]["rules"], list):
        raise UsageError(f"the proposer's reply holds no rules object: {reply[:200]!r}")
    out = []
    for item in found[-1]["rules"][:MAX_RULES]:
        if not isinstance(item, dict) or not isinstance(item.get("rule"), str) or not item["rule"].strip():
            continue
        cited = [c for c in item.get("cases") or [] if isinstance(c, str) and c in ids]
        if cited:
            out.append({"rule": " ".join(item["rule"].split())[:400],
                        "rows": [ids[c].key for c in dict.fromkeys(cited)]})
    return out


def rules_section(rules: list[dict[str, Any]]) -> str:
    return RULES_HEADER + "\n" + "\n".join(f"- {_safe(r['rule'], 400)}" for r in rules)


# ------------------------------------------------------------------------------------------------ examples
def choose_examples(rows: list[AlignRow], seed: int = 0, per_verdict: int = EXAMPLES_PER_VERDICT) -> list[AlignRow]:
    """Train rows to show: for each of the people's verdicts the same number, disagreements with the current
    judge first (where it needs teaching), in a seeded order; as many per verdict as the scarcer verdict has."""
    rng = random.Random(seed)
    by_verdict = {}
    for v in (1, 0):
        mine = [r for r in train_only(rows) if r.human == v]
        rng.shuffle(mine)
        by_verdict[v] = sorted(mine, key=lambda r: r.human == r.judge)[:per_verdict]  # stable: disagreements first
    n = min(len(x) for x in by_verdict.values())
    picked = [r for v in (0, 1) for r in by_verdict[v][:n]]
    rng.shuffle(picked)
    return picked


def examples_section(examples: list[AlignRow], fields: list[str]) -> str:
    blocks = []
    for n, r in enumerate(train_only(examples), 1):
        text = "\n".join(f"{f}: {_safe(r.values.get(f))}" for f in fields if r.values.get(f) not in (None, ""))
        note = f" ({_safe('; '.join(r.notes), 300)})" if r.notes else ""
        blocks.append(f"Example {n}\n{text}\nReviewers' verdict: {_verdict_word(r.human)}, "
                      f"{r.human_value:g}{note}")
    return EXAMPLES_HEADER + "\n\n" + "\n\n".join(blocks)


def build(method: str, current: Template, rules: list[dict[str, Any]], examples: list[AlignRow],
          fields: list[str]) -> Candidate:
    """One candidate of ``method`` (rules, examples or both) from what was made of the train rows."""
    parts = []
    if method in ("rules", "both"):
        if not rules:
            raise ValueError("no rule to add")
        parts.append(rules_section(rules))
    if method in ("examples", "both"):
        if not examples:
            raise ValueError("no example to add")
        parts.append(examples_section(examples, fields))
    t = with_section(current, "\n\n".join(parts), method)
    return Candidate(method, t, template_text(t), rules=rules if method != "examples" else [],
                     examples=[dict(r.key, human=_verdict_word(r.human)) for r in examples]
                     if method != "rules" else [])
