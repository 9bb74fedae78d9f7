"""Errors the engine raises at its door.

Bad input is refused before anything runs, with every problem named by file,
1-based row and field. Per-row failures during a run are not exceptions: they
become explained results on that row (see ``runner``).
"""
from __future__ import annotations

from dataclasses import dataclass

# How many problems one validation report lists before it stops counting.
MAX_PROBLEMS = 50


class EvalError(Exception):
    """Base class for errors a user can act on (shown without a traceback)."""


class UsageError(EvalError):
    """A bad argument: unknown metric, bad threshold, missing option."""


class StoreVersionError(EvalError):
    """The store's schema is older than the code (upgrade it) or newer (upgrade the code); nothing was changed."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file.

    Attributes:
        source: the file name (or ``<data>`` for in-memory data).
        row: 1-based row (line for JSONL/CSV records, element for JSON arrays); 0 for the whole file.
        field: the column or field concerned, '' when not one field.
        message: what is wrong and, where it helps, what to do.
    """

    source: str
    row: int
    field: str
    message: str

    def __str__(self) -> str:
        where = self.source
        if self.row:
            where += f", row {self.row}"
        if self.field:
            where += f", field '{self.field}'"
        return f"{where}: {self.message}"


class DataValidationError(EvalError):
    """A dataset failed validation; ``problems`` lists every problem found (capped)."""

    def __init__(self, problems: list[Problem], truncated: bool = False):
        self.problems = list(problems)
        self.truncated = truncated
        head = f"{len(self.problems)}{'+' if truncated else ''} problem(s) in the data"
        lines = [head + ":"] + [f"  - {p}" for p in self.problems]
        if truncated:
            lines.append(f"  (stopped after {MAX_PROBLEMS} problems)")
        super().__init__("\n".join(lines))

    def one_line(self) -> str:
        """Every problem on one line (for the CLI), '; '-separated."""
        head = f"{len(self.problems)}{'+' if self.truncated else ''} problem(s) in the data: "
        return head + "; ".join(str(p) for p in self.problems)


class ProblemCollector:
    """Collects problems up to ``MAX_PROBLEMS`` and raises them all at once."""

    def __init__(self, source: str):
        self.source = source
        self.problems: list[Problem] = []
        self.truncated = False

    def add(self, row: int, field: str, message: str) -> None:
        if len(self.problems) >= MAX_PROBLEMS:
            self.truncated = True
            return
        self.problems.append(Problem(self.source, row, field, message))

    @property
    def full(self) -> bool:
        return self.truncated

    def raise_if_any(self) -> None:
        if self.problems:
            raise DataValidationError(sorted(self.problems, key=lambda p: p.row), self.truncated)
