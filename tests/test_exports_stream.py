"""Exports written a chunk of rows at a time (evaluators.read.exports.write_export) hold what the whole run
in memory gave: CSV as pandas writes the stored rows, JSON lines as the previous ``jsonl_text`` wrote them,
the HTML report's rows as the stored cells say; and memory grows with a chunk, not with the run.

The runs are tests.test_results_scale's: every kind, errored, skipped and pending rows, notes, conversations
(so keys such as ``<metric>_error`` or ``_note`` first appear on a later row, after a chunk was written).
"""
from __future__ import annotations

import csv
import io
import json
import math
import random
import tracemalloc
from html.parser import HTMLParser

import pandas as pd
import pytest

from evaluators.read.exports import iter_rows, write_csv, write_export, write_jsonl
from evaluators.read.results import open_results
from evaluators.read.view import open_view
from tests.conftest import store_url_in
from tests.test_results_scale import CONV_METRICS, SINGLE_METRICS, _store_run

FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _pandas_csv(rows: list[dict]) -> str:
    """The CSV export's rules, stated here and written by pandas: the columns in the order pandas finds
    them in the rows, nested values as JSON, no value (None, NaN, infinity) as an empty cell, and a cell
    or header a spreadsheet would run as a formula behind a quote."""
    def cell(v):
        if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))):
            return ""
        if isinstance(v, (dict, list)):
            v = json.dumps(v, ensure_ascii=False)
        if isinstance(v, str):
            return "'" + v if v.startswith(FORMULA) else v
        return str(v)

    columns = list(pd.DataFrame(rows).columns)
    frame = pd.DataFrame([[cell(r.get(c)) for c in columns] for r in rows],
                         columns=["'" + c if c.startswith(FORMULA) else c for c in columns])
    return frame.to_csv(index=False, lineterminator="\r\n")


def _previous_jsonl(rows: list[dict]) -> str:
    """``jsonl_text`` before exports were streamed, line for line."""
    clean = lambda v: None if isinstance(v, float) and (math.isnan(v) or math.isinf(v)) else v  # noqa: E731
    return "".join(json.dumps({k: clean(v) for k, v in r.items()}, ensure_ascii=False, default=str) + "\n"
                   for r in rows)


def _previous_csv(rows: list[dict]) -> str:
    """``csv_text`` before exports were streamed, line for line: the reference the chunked writer must equal."""
    columns: list[str] = []
    for r in rows:
        for k in r:
            if k not in columns:
                columns.append(k)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["'" + c if c.startswith(FORMULA) else c for c in columns])
    for r in rows:
        cells = []
        for c in columns:
            v = r.get(c)
            v = None if isinstance(v, float) and (math.isnan(v) or math.isinf(v)) else v
            if isinstance(v, (dict, list)):
                v = json.dumps(v, ensure_ascii=False)
            cells.append("" if v is None else ("'" + v if isinstance(v, str) and v.startswith(FORMULA) else v))
        w.writerow(cells)
    return buf.getvalue()


class _Rows(HTMLParser):
    """The text of every cell of the report's rows table (``table.rows``), row by row."""

    def __init__(self):
        super().__init__()
        self.rows: list[list[str]] = []
        self._in, self._cell = False, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._in = ("class", "rows") in attrs
        elif self._in and tag == "tr":
            self.rows.append([])
        elif self._in and tag == "td":
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._in = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _expected_report_rows(res) -> list[list[str]]:
    """What each line of the report's rows table says, from the stored cells: row number, query, response,
    and per metric the value (3 decimals) and the judge's reason or the error ("pending" without a result)."""
    out = []
    for i in range(len(res.dataset)):
        c = res.dataset.canonical(i)
        turns = res.dataset.turns(i) if res.dataset.shape == "conversation" else None
        line = [str(res.dataset.row_no(i)), c.get("query") or (turns[-1].query if turns else ""),
                c.get("response") or (turns[-1].response if turns else "")]
        for s in res.specs:
            cell = res.cells[s.name][i]
            value = "–" if cell is None or cell.value is None else f"{cell.value:.3f}"
            line.append(value + ((cell.reason or cell.error or "") if cell else "pending"))
        out.append(line)
    return out


@pytest.fixture(params=["single", "conversation"])
def run(request, store_url):
    if request.param == "single":
        words = ["alpha", "=Beta", "gamma, \"quoted\"", "DELTA\nline", "epsilon", "Zeta <b>bold</b>"]
        records = [{"query": f"Question {i} about {words[i % 6]}", "response": f"Answer {i}: {words[(i * 5) % 6]} ÉLAN",
                    "ground_truth": "x", "context": "c", "model_A": "a"} for i in range(60)]
        return _store_run(store_url, records, SINGLE_METRICS, lambda i: 1, seed=7)
    records = []
    for i in range(24):
        msgs = []
        for t in range(1 + i % 3):
            msgs += [{"role": "user", "content": f"user {i}.{t} Gamma"}, {"role": "assistant", "content": f"bot {i}.{t}"}]
        records.append({"messages": msgs})
    return _store_run(store_url, records, CONV_METRICS, lambda i: 1 + i % 3, seed=11)


def test_streamed_exports_equal_the_stored_rows_written_whole(run, tmp_path):
    store, rid = run
    stored = open_results(store, rid).rows()  # every row in memory: the previous way
    view = open_view(store, rid)  # the dashboard's columnar view, read a chunk at a time
    got = {fmt: write_export(view, fmt, tmp_path / f"out.{fmt}", store.get_run(rid)).read_bytes().decode("utf-8")
           for fmt in ("csv", "jsonl", "html")}
    assert got["csv"] == _pandas_csv(stored)
    assert got["jsonl"] == _previous_jsonl(stored)
    assert [json.loads(line) for line in got["jsonl"].splitlines()] == json.loads(json.dumps(stored, default=str)
                                                                                   .replace("NaN", "null"))
    parser = _Rows()
    parser.feed(got["html"])
    assert parser.rows[1:] == _expected_report_rows(open_results(store, rid))  # [0]: the header line
    assert view._cols.all_cells is None  # the report read the view's cells a chunk at a time, never all at once


@pytest.mark.parametrize("chunk", [1, 2, 7, 500])
def test_csv_columns_first_seen_after_a_chunk_was_written_are_filled_in(run, chunk):
    store, rid = run
    stored = open_results(store, rid).rows()
    late = {k for r in stored[chunk:] for k in r} - {k for r in stored[:chunk] for k in r}
    assert late or chunk == 500  # keys a later chunk brings: the case the writer fills in
    buf = io.StringIO(newline="")
    write_csv(iter_rows(open_view(store, rid), chunk=chunk), buf, chunk=chunk)
    assert buf.getvalue() == _previous_csv(stored) == _pandas_csv(stored)


def test_csv_of_hostile_rows_equals_the_previous_csv_at_any_chunk():
    """Rows with keys coming and going, empty cells, line breaks, quotes, formulas, NaN: the chunked writer
    equals the previous whole-in-memory one, including its one quoted empty row (a single empty cell)."""
    rnd = random.Random(3)
    values = ["", "a", "x,y", 'q"uote', "line\nbreak", "cr\r\nlf", 1.5, float("nan"), None, {"a": [1]}, "=1", 3, True]
    for _ in range(400):
        keys = [f"k{i}" for i in range(rnd.randint(0, 4))]
        rows = [{k: rnd.choice(values) for k in keys if rnd.random() < 0.5} for _ in range(rnd.randint(0, 9))]
        for chunk in (1, 2, 3, 500):
            buf = io.StringIO(newline="")
            write_csv(rows, buf, chunk)
            assert buf.getvalue() == _previous_csv(rows), (rows, chunk)


def _export_peaks(folder, n: int) -> dict[str, int]:
    """Bytes allocated at the peak while a stored run of ``n`` rows (f1_score, stored directly) is exported."""
    from evaluators import Store, load_dataset
    from evaluators.store.schema import Result

    store = Store(store_url_in(folder, str(n)))
    did = store.save_dataset(load_dataset([{"query": f"What does clause {i} say about delivery?",
                                            "response": f"Clause {i} says delivery happens within {i % 30 + 1} days. " * 3,
                                            "ground_truth": f"Within {i % 30 + 1} days."} for i in range(n)]))
    rid = store.create_run(did, {"metrics": ["f1_score"]}, "h", f"run of {n}")
    store.write_results(rid, [Result(i, "f1_score", 0, "ok", value=(i % 10) / 10, outputs={"f1_score": (i % 10) / 10})
                              for i in range(n)])
    view = open_view(store, rid)
    for _ in iter_rows(view):  # imports, and the bounded caches filled (2,048 records, 512 rows' cells)
        pass
    peaks = {}
    for fmt, write in (("csv", write_csv), ("jsonl", write_jsonl)):
        tracemalloc.start()
        with open(folder / f"rows-{n}.{fmt}", "w", encoding="utf-8", newline="") as f:
            write(iter_rows(view), f)
        peaks[fmt] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peaks


def test_an_export_holds_a_chunk_of_rows_not_the_run(tmp_path):
    """Four times the rows, the same memory: exporting 12,000 rows allocates at its peak less than 1.5 times
    what 3,000 rows do (read and written 500 at a time, both past the caches' bounds); with the whole run
    in memory it is ~4 times."""
    small, big = _export_peaks(tmp_path, 3000), _export_peaks(tmp_path, 12000)
    for fmt in small:
        assert big[fmt] < 1.5 * small[fmt], (fmt, small[fmt], big[fmt])
