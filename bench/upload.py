"""A large upload validated and previewed: time and peak memory, this checkout against a git revision.

    python bench/upload.py [--mb 100] [--baseline main] [--save]

Generates a realistic JSONL file (RAG rows of varied text: words drawn from the bundled samples
plus some accented and non-Latin words and emoji, fixed seed; every row different), then, in a
fresh process per measurement, runs what the Datasets page runs on an upload: ``inspect_file``
(parse, detect the mapping, check every row, build the preview). Reports:

- seconds for the inspection (the issue's target: 10 s for 100 MB),
- peak RSS above the process's size once the file's bytes are loaded (what the inspection adds; the
  upload's bytes themselves are held by Streamlit anyway), in MB and as a multiple of the file size,
- tracemalloc's peak of Python allocations during the inspection (a separate run: tracing slows it),
- with --save, seconds to compute the content hash and to store the dataset in SQLite (the Save button).

The baseline is the same engine code at a git revision (``git archive``), run on the same file.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tarfile
import io
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, resource, sys, time, tracemalloc
sys.path.insert(0, sys.argv[1])
from evaluators.data.dataset import inspect_file
path, mode = sys.argv[2], sys.argv[3]
data = open(path, "rb").read()
def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024
base = rss_mb()
out = {}
if mode == "trace":
    tracemalloc.start()
    insp = inspect_file(data, "bench.jsonl")
    out["traced_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
else:
    t = time.perf_counter()
    insp = inspect_file(data, "bench.jsonl")
    out["seconds"] = time.perf_counter() - t
    out["peak_rss_above_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
    if mode == "save":
        from evaluators.store.store import Store
        import tempfile
        t = time.perf_counter(); insp.dataset.content_hash; out["hash_seconds"] = time.perf_counter() - t
        t = time.perf_counter()
        Store(f"sqlite:///{tempfile.mkdtemp()}/b.db").save_dataset(insp.dataset)
        out["save_seconds"] = time.perf_counter() - t
        out["peak_rss_above_mb_after_save"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
out["rows"] = len(insp.dataset) if insp.dataset else 0
out["problems"] = len(insp.problems)
out["preview"] = len(insp.preview)
print(json.dumps(out))
"""


def make_file(path: Path, mb: int, seed: int = 11) -> int:
    """Write about ``mb`` MB of varied RAG rows; returns the row count."""
    words = []
    for line in (ROOT / "data" / "rag_single_turn.jsonl").read_text().splitlines():
        rec = json.loads(line)
        words += " ".join(str(rec.get(k, "")) for k in ("query", "context", "response", "ground_truth")).split()
    words += ["naïve", "café", "Straße", "façade", "Zürich", "São", "東京", "データ", "Москва", "مرحبا", "🙂", "✓"]
    rng = random.Random(seed)
    topics = ["billing", "geography", "science", "support", "history", "health"]

    def text(lo: int, hi: int) -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(lo, hi)))

    target, n = mb * 2**20, 0
    with path.open("w", encoding="utf-8") as f:
        while f.tell() < target:
            n += 1
            f.write(json.dumps({"id": f"row-{n:07d}", "query": text(8, 25) + "?", "context": text(80, 250),
                                "response": text(30, 120), "ground_truth": text(10, 40),
                                "topic": rng.choice(topics)}, ensure_ascii=False) + "\n")
    return n


def code_at(rev: str, into: Path) -> Path:
    """The engine package as it is at ``rev``, extracted under ``into``."""
    tar = subprocess.run(["git", "archive", rev, "evaluators"], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(into, filter="data")
    return into


def measure(code: Path, path: Path, mode: str) -> dict:
    p = subprocess.run([sys.executable, "-c", CHILD, str(code), str(path), mode], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(p.stderr)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--baseline", default="main", help="git revision to compare with ('' for none)")
    ap.add_argument("--save", action="store_true", help="also time the content hash and the SQLite save")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = tmp / "bench.jsonl"
        rows = make_file(path, args.mb)
        size_mb = path.stat().st_size / 2**20
        print(f"{path.stat().st_size:,} bytes ({size_mb:.1f} MB), {rows:,} RAG rows of varied text; Python {sys.version.split()[0]}")
        codes = [("this checkout", ROOT)]
        if args.baseline:
            codes.insert(0, (f"baseline {args.baseline}", code_at(args.baseline, tmp / "baseline")))
        print(f"{'code':<16} {'inspect s':>9} {'peak RSS +MB':>12} {'x file':>7} {'traced peak MB':>14} {'x file':>7}")
        got = {}
        for label, code in codes:
            m = measure(code, path, "save" if args.save else "time")
            tr = measure(code, path, "trace")
            assert m["rows"] == rows and m["problems"] == 0, m
            got[label] = (m, tr)
            print(f"{label:<16} {m['seconds']:>9.2f} {m['peak_rss_above_mb']:>12.0f} {m['peak_rss_above_mb'] / size_mb:>7.2f}"
                  f" {tr['traced_peak_mb']:>14.0f} {tr['traced_peak_mb'] / size_mb:>7.2f}")
            if args.save:
                print(f"{'':<16} content hash {m['hash_seconds']:.2f} s, SQLite save {m['save_seconds']:.2f} s, "
                      f"peak RSS after save +{m['peak_rss_above_mb_after_save']:.0f} MB")
        if len(got) == 2:
            (b, bt), (o, ot) = got.values()
            print(f"ratio baseline/this: time {b['seconds'] / o['seconds']:.2f}x, peak RSS "
                  f"{b['peak_rss_above_mb'] / o['peak_rss_above_mb']:.2f}x, traced peak {bt['traced_peak_mb'] / ot['traced_peak_mb']:.2f}x")


if __name__ == "__main__":
    main()
