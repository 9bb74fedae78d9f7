"""A text search reads the whole memory-mapped search file, and leaves none of it mapped into the process."""
from __future__ import annotations

import json
import random
from pathlib import Path

from evaluators import Store, load_dataset
from evaluators.read.columns import SearchText

WORDS = ("refund policy courier parcel invoice warranty battery screen hinge keyboard firmware update latency "
         "router modem outage credit voucher delivery address customs duty tariff carrier tracking label").split()


def rss_file_kb() -> int:
    """Resident file-backed pages mapped into this process (kB), from /proc/self/status."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    raise AssertionError("no RssFile in /proc/self/status")


def test_a_search_finds_its_rows_and_leaves_the_file_unmapped(tmp_path):
    rnd = random.Random(3)
    rows = [{"query": " ".join(rnd.choices(WORDS, k=40)),
             "response": " ".join(rnd.choices(WORDS, k=300)) + (" Zanzibar" if i in (17, 5999) else "")}
            for i in range(6000)]
    path = tmp_path / "big.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = Store(f"sqlite:///{tmp_path / 'evals.db'}")
    ds = load_dataset(path)
    ds_id = store.save_dataset(ds)
    search = SearchText(store, ds_id, ds, tmp_path / "views")
    search.ensure()
    size_kb = (tmp_path / "views" / f"ds-{ds_id}.search").stat().st_size // 1024
    assert size_kb > 10_000  # ~12 MB of text: big enough to see in the process's memory
    before = rss_file_kb()
    hits = search.contains("zanzibar")  # not in any other row: the whole file is read
    grown = rss_file_kb() - before
    assert hits.nonzero()[0].tolist() == [17, 5999]
    assert grown < size_kb // 4, (grown, size_kb)
