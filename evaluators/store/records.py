"""Read-side helpers of the store: a stored dataset's records read lazily, and the set of result keys a
resumed run already has."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Iterable, Iterator

from evaluators.store.schema import RECORD_CHUNK

if TYPE_CHECKING:
    from evaluators.store.store import Store


def _json_paths(keys: list[str]) -> list[str] | None:
    """SQLite JSON paths of top-level keys; None when a key cannot be written as one (a quote in it)."""
    if any('"' in k or "\\" in k or not k.isascii() for k in keys):
        return None
    return [f'$."{k}"' for k in keys]


class StoredRecords(Sequence):
    """A stored dataset's records as a read-only sequence, read from the store ``RECORD_CHUNK`` at a
    time as they are used; the last chunk read is kept, so a walk in row order reads each once."""

    def __init__(self, store: Store, dataset_id: str, n: int, chunk: int = 0):
        self.store, self.dataset_id, self.n = store, dataset_id, n
        self.chunk = chunk or RECORD_CHUNK
        self._cached: tuple[int, list[dict]] = (-1, [])

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(f"record {i} out of range (0-{self.n - 1})")
        start = i - i % self.chunk
        at, recs = self._cached
        if at != start:
            recs = list(self.store.iter_records(self.dataset_id, start, min(start + self.chunk, self.n), self.chunk))
            self._cached = (start, recs)
        return recs[i - start]

    def __iter__(self) -> Iterator[dict]:
        return self.store.iter_records(self.dataset_id, 0, self.n, self.chunk)

    def __eq__(self, other) -> bool:
        return isinstance(other, (list, Sequence)) and len(other) == self.n and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]


class KeySet:
    """A set of (row, metric, turn) keys as one bitmap over the rows per (metric, turn): a million
    rows take 125 kB per metric, where a set of tuples takes about 150 MB."""

    def __init__(self, keys: Iterable[tuple[int, str, int]] = ()):
        self._bits: dict[tuple[str, int], bytearray] = {}
        for k in keys:
            self.add(k)

    def add(self, key: tuple[int, str, int]) -> None:
        row, metric, turn = key
        bits = self._bits.get((metric, turn))
        if bits is None:
            bits = self._bits[(metric, turn)] = bytearray()
        byte = row >> 3
        if byte >= len(bits):
            bits.extend(bytes(max(byte + 1 - len(bits), len(bits) // 2)))  # grows geometrically
        bits[byte] |= 1 << (row & 7)

    def __contains__(self, key) -> bool:
        row, metric, turn = key
        bits = self._bits.get((metric, turn))
        return bits is not None and row >= 0 and (row >> 3) < len(bits) and bool(bits[row >> 3] & (1 << (row & 7)))

    def __iter__(self) -> Iterator[tuple[int, str, int]]:
        for (metric, turn), bits in self._bits.items():
            for byte, v in enumerate(bits):
                if v:
                    for b in range(8):
                        if v & (1 << b):
                            yield (byte * 8 + b, metric, turn)

    def __len__(self) -> int:
        return sum(bin(v).count("1") for bits in self._bits.values() for v in bits if v)

    def __eq__(self, other) -> bool:
        if isinstance(other, KeySet):
            other = set(other)
        return isinstance(other, (set, frozenset)) and len(self) == len(other) and all(k in self for k in other)

    __hash__ = None  # type: ignore[assignment]
