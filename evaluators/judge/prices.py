"""What a judge's calls cost: the user's own prices per model, and the one arithmetic every figure uses.

Prices are the user's, never built in: an operator lists them in ``$EVAL_HOME/prices.toml`` (or the file
named by ``EVAL_PRICES``), a user gives them for a run (``--price`` on the command line, the New evaluation
page), and a run keeps the prices it was started with in its spec, so its cost reads the same later::

    [gpt-4o-mini]          # the model name the judge is called with (an Azure deployment's name)
    input = 0.15           # USD per 1M prompt tokens
    cached_input = 0.075   # USD per 1M prompt tokens the provider reports cached (default: input)
    output = 0.60          # USD per 1M completion tokens
    batch = 0.5            # what the Batch API charges, as a share of the above (default 0.5)
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

from evaluators.core.errors import UsageError

PER = 1_000_000  # prices are per million tokens
BATCH_SHARE = 0.5  # the Batch API's price as a share of the direct one (OpenAI's and Azure's published half)
# Completion tokens a verdict is estimated to take: the built-in templates ask for a sentence or two and a score.
VERDICT_TOKENS = 120


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens: ``input``, ``cached_input`` (prompt tokens the provider served from its cache),
    ``output``; ``batch``: the share of those the Batch API charges."""

    input: float
    output: float
    cached_input: float | None = None
    batch: float = BATCH_SHARE

    def __post_init__(self):
        for k, v in asdict(self).items():
            if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or not v >= 0
                                  or v == float("inf")):
                raise UsageError(f"price {k}: {v!r} is not a non-negative number")

    @property
    def cached(self) -> float:
        return self.input if self.cached_input is None else self.cached_input

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0, batch: bool = False) -> float:
        """USD of one call (or of totals): cached prompt tokens at the cached price, the rest at input's."""
        cached = min(max(cached_tokens or 0, 0), prompt_tokens or 0)
        usd = ((prompt_tokens or 0) - cached) * self.input + cached * self.cached + (completion_tokens or 0) * self.output
        return usd / PER * (self.batch if batch else 1.0)

    def to_dict(self) -> dict[str, float]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "price") -> "Price":
        unknown = set(d) - {"input", "output", "cached_input", "batch"}
        if unknown:
            raise UsageError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} "
                             "(input, cached_input, output, batch)")
        missing = [k for k in ("input", "output") if k not in d]
        if missing:
            raise UsageError(f"{where}: missing {' and '.join(missing)} (USD per 1M tokens)")
        try:
            return cls(input=d["input"], output=d["output"], cached_input=d.get("cached_input"),
                       batch=d.get("batch", BATCH_SHARE))
        except UsageError as e:
            raise UsageError(f"{where}: {e}") from None

    @classmethod
    def parse(cls, text: str) -> "Price":
        """``INPUT,CACHED,OUTPUT[,BATCH]`` (USD per 1M tokens; CACHED may be empty), as ``--price`` takes it."""
        parts = [p.strip() for p in text.split(",")]
        if len(parts) not in (3, 4):
            raise UsageError(f"--price takes INPUT,CACHED_INPUT,OUTPUT[,BATCH_SHARE] in USD per 1M tokens, got '{text}'")
        try:
            vals = [float(p) if p else None for p in parts]
        except ValueError:
            raise UsageError(f"--price: '{text}' has something that is not a number") from None
        if vals[0] is None or vals[2] is None:
            raise UsageError(f"--price: input and output prices are needed, got '{text}'")
        return cls(input=vals[0], cached_input=vals[1], output=vals[2],
                   batch=vals[3] if len(vals) == 4 and vals[3] is not None else BATCH_SHARE)


def prices_file() -> Path:
    """``EVAL_PRICES``, else ``$EVAL_HOME/prices.toml`` (default ``~/.evaldash/prices.toml``)."""
    if os.environ.get("EVAL_PRICES"):
        return Path(os.environ["EVAL_PRICES"])
    return Path(os.environ.get("EVAL_HOME") or Path.home() / ".evaldash") / "prices.toml"


def configured_prices() -> dict[str, Price]:
    """The operator's price table (model -> :class:`Price`); empty when there is no file.

    Raises:
        UsageError: a file that cannot be read, naming the file and the model whose entry is wrong.
    """
    import tomllib

    path = prices_file()
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: not valid TOML ({e})") from None
    out = {}
    for model, entry in data.items():
        if not isinstance(entry, dict):
            raise UsageError(f"{path}: [{model}] must be a table of prices")
        out[model] = Price.from_dict(entry, where=f"{path} [{model}]")
    return out


def price_for(model: str | None, prices: Mapping[str, Any] | None = None) -> Price | None:
    """A model's price: from ``prices`` (a run's own: model -> Price or its dict), else the operator's table."""
    if not model:
        return None
    for table in (prices or {}), None:
        if table is None:
            try:
                table = configured_prices()
            except UsageError:
                return None
        p = table.get(model)
        if p is not None:
            return p if isinstance(p, Price) else Price.from_dict(p, where=f"price of {model}")
    return None
