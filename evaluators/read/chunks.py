"""Reading a run a chunk of rows at a time, for exports and the HTML report (so no pass over a run holds it whole)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Sequence

if TYPE_CHECKING:
    from evaluators.read.results import RunResults

CHUNK_ROWS = 500  # rows read from the store (two queries) and written per step of an export


def row_chunks(res: "RunResults", chunk: int = CHUNK_ROWS, rows: Sequence[int] | None = None) -> Iterator[list[int]]:
    """A run's row indices (``rows``: only these, in their order), ``chunk`` at a time, each chunk's cells and
    records read in one go first (``RunResults.prefetch``: the columnar view reads them in one query each and
    keeps a bounded cache), so that a pass over the run never holds the whole run."""
    n = len(res.dataset) if rows is None else len(rows)
    for start in range(0, n, chunk):
        idx = list(range(start, min(n, start + chunk))) if rows is None else [int(i) for i in rows[start:start + chunk]]
        res.prefetch(idx)
        yield idx
