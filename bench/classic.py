"""The whole CLI run of the classic metrics vs the same metrics computed the SDK's way.

    python bench/classic.py [--quick | --pairs 10000] [--unit both|paragraph|answer|short] [--keep DIR [--reuse-sdk]]

Prints, per data set, the speed-up in wall time and in CPU time, the values that differ and the
load average, with PASS (>= 10x in wall time and 0 values differing) or FAIL; exit code 1 on any
FAIL. The claim is elapsed time: the SDK way runs in one process, our CLI computes the classic
metrics on both cores (a forked worker, ``EVALDASH_CLASSIC_WORKERS``), so its CPU time (the
worker's included) is the larger figure and the CPU ratio the lower one; both are printed. Wall
time only means something on a quiet machine: run it when nothing else does, and read the load
average it prints.

Data: real model answers from WildBench (``../shared/fixtures/wildbench/eval_results``,
read at run time, never copied into the project; the bench says so and stops when
they are absent): three models' answers to the same ~1,000 sessions. Each pair is
paragraph k of one model's answer (response) vs paragraph k of a *different* model's
answer to the same session (ground truth); paragraphs are blank-line separated, at
least 8 words (a RAG-answer-sized text). ``--unit answer`` pairs the whole answers instead
(past the ~5,900 ordered pairs, a pair comes back with other perturbations); ``--unit short``
pairs whole answers of at most :data:`SHORT_WORDS` words, both sides (short answers, as most QA
data sets have: ~57 words on average; the WildBench answers hold 180 such ordered pairs, so past
those a pair comes back with other perturbations). Both sides are lightly perturbed with a fixed
seed (1-4 word drops, swaps or repeats, whitespace kept) so that no text repeats
across pairs and no cache helps (the bench prints how many distinct texts there are).

Timed, each as one fresh process, wall clock, start-up included:
  * SDK way: a script that reads the same JSONL file and, per row, does what Azure AI
    Evaluation SDK 1.18's F1Score, Bleu, Gleu, RougeScore(rougeL) and Meteor evaluators
    do: ``nltk_tokenize`` (``nltk.word_tokenize`` / ``NISTTokenizer``) once per metric
    and text, NLTK's ``sentence_bleu`` / ``sentence_gleu`` / ``meteor_score``, a new
    ``rouge_score.RougeScorer`` per call, the SDK's F1 code; then writes one JSON line
    per row. (The SDK's own ``evaluate()`` adds its own overhead; this is its arithmetic
    only, so the ratio is a floor.)
  * ours: ``python -m evaluators run FILE --metrics f1_score,bleu,gleu,rouge,meteor
    --out DIR`` on a fresh SQLite store (dataset load, planning, metrics, store writes,
    rows.jsonl and metrics.json); CPU time counts its worker process too.
Then every value of rows.jsonl is compared with the SDK way's (exact float equality).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WILDBENCH = ROOT.parent / "shared" / "fixtures" / "wildbench" / "eval_results"
METRICS = "f1_score,bleu,gleu,rouge,meteor"
# (our rows.jsonl key, the SDK way's key)
KEYS = [("outputs.f1_score.f1_score", "f1_score"), ("outputs.bleu.bleu_score", "bleu_score"),
        ("outputs.gleu.gleu_score", "gleu_score"), ("outputs.meteor.meteor_score", "meteor_score"),
        ("outputs.rouge.rouge_f1_score", "rouge_f1_score"), ("outputs.rouge.rouge_precision", "rouge_precision"),
        ("outputs.rouge.rouge_recall", "rouge_recall")]


def load_answers() -> dict[str, dict[str, str]]:
    """session id -> model -> answer, for every non-empty WildBench answer."""
    sessions: dict[str, dict[str, str]] = {}
    for f in sorted(WILDBENCH.rglob("*.json")):
        for r in json.loads(f.read_text()):
            out = r.get("model_output")
            if isinstance(out, str) and out.strip():
                sessions.setdefault(r["session_id"], {})[f.stem] = out
    return sessions


def perturb(text: str, rng: random.Random) -> str:
    """1-4 word-level edits (drop, swap, repeat); the whitespace between words is kept."""
    parts = re.split(r"(\s+)", text)
    words = [i for i in range(0, len(parts), 2) if parts[i]]
    for _ in range(rng.randint(1, 4)):
        if len(words) < 3:
            break
        op, i = rng.random(), rng.choice(words)
        if op < 0.4:
            parts[i] = ""
        elif op < 0.7:
            j = rng.choice(words)
            parts[i], parts[j] = parts[j], parts[i]
        else:
            parts[i] = parts[i] + " " + parts[i]
    return "".join(parts)


def paragraphs(answer: str) -> list[str]:
    """An answer's paragraphs (blank-line separated) of at least 8 words."""
    return [p.strip() for p in re.split(r"\n\s*\n", answer) if len(p.split()) >= 8]


SHORT_WORDS = 100  # a "short answer": a whole WildBench answer of at most this many words


def short(answer: str) -> list[str]:
    """The whole answer when it is short (at most :data:`SHORT_WORDS` words), else nothing."""
    return [answer] if len(answer.split()) <= SHORT_WORDS else []


def make_pairs(n: int, seed: int = 8, unit: str = "paragraph") -> list[dict]:
    """``n`` (response, ground truth) pairs: paragraph k of one model's answer vs paragraph k of
    another model's answer to the same WildBench session (``unit="answer"``: the whole
    answers; ``unit="short"``: the whole answers when both are short), both lightly perturbed."""
    split = {"paragraph": paragraphs, "short": short}.get(unit, lambda a: [a])
    sessions = {sid: {m: split(a) for m, a in models.items()} for sid, models in load_answers().items()}
    base = [(sid, a, b, k) for sid, models in sorted(sessions.items()) for a in sorted(models) for b in sorted(models)
            if a != b for k in range(min(len(models[a]), len(models[b])))]
    rng = random.Random(seed)
    rng.shuffle(base)
    if len(base) < n and unit == "paragraph":
        sys.exit(f"only {len(base)} {unit} pairs in the WildBench answers; ask for fewer")
    # whole answers: ~5,900 ordered pairs (short ones: 180); past that a pair comes back with other perturbations
    rows = []
    for i in range(n):
        sid, a, b, k = base[i % len(base)]
        rows.append({"id": f"{sid}:{a}:{b}:{k}:{i}", "response": perturb(sessions[sid][a][k], rng),
                     "ground_truth": perturb(sessions[sid][b][k], rng)})
    return rows


SDK_WAY = r'''
import json, sys, time
t0 = time.perf_counter()
import nltk
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
from nltk.translate.gleu_score import sentence_gleu
from nltk.translate.meteor_score import meteor_score
from rouge_score import rouge_scorer

def nltk_tokenize(text):  # azure/ai/evaluation/_common/utils.py (1.18), minus the download check
    if not text.isascii():
        from nltk.tokenize.nist import NISTTokenizer
        tokens = NISTTokenizer().international_tokenize(text)
    else:
        tokens = nltk.word_tokenize(text)
    return list(tokens)

def f1(response, ground_truth):  # _f1_score.py (1.18)
    import re, string
    from collections import Counter
    def normalize_text(text):
        def remove_articles(text): return re.sub(r"\b(a|an|the)\b", " ", text)
        def white_space_fix(text): return " ".join(text.split())
        def remove_punctuation(text):
            exclude = set(string.punctuation)
            return "".join(ch for ch in text if ch not in exclude)
        return white_space_fix(remove_articles(remove_punctuation(text.lower())))
    p, r = normalize_text(response).split(), normalize_text(ground_truth).split()
    common = Counter(p) & Counter(r)
    n = sum(common.values())
    if n == 0:
        return 0.0
    precision, recall = 1.0 * n / len(p), 1.0 * n / len(r)
    return (2.0 * precision * recall) / (precision + recall)

out = open(sys.argv[2], "w")
for line in open(sys.argv[1]):
    row = json.loads(line)
    gt, resp = row["ground_truth"], row["response"]
    res = {"f1_score": f1(resp, gt)}
    res["bleu_score"] = sentence_bleu([nltk_tokenize(gt)], nltk_tokenize(resp),
                                      smoothing_function=SmoothingFunction().method4)
    res["gleu_score"] = sentence_gleu([nltk_tokenize(gt)], nltk_tokenize(resp))
    m = rouge_scorer.RougeScorer(rouge_types=["rougeL"]).score(gt, resp)["rougeL"]
    res.update(rouge_precision=float(m.precision), rouge_recall=float(m.recall), rouge_f1_score=float(m.fmeasure))
    res["meteor_score"] = meteor_score([nltk_tokenize(gt)], nltk_tokenize(resp), alpha=0.9, beta=3.0, gamma=0.5)
    out.write(json.dumps(res) + "\n")
out.close()
'''


def run_timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-3000:]}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def sdk_way(data: Path, work: Path, reuse: bool) -> tuple[float, float, Path]:
    """Run (or, with ``reuse``, re-read a run of) the SDK way on exactly these pairs."""
    from tests.sdk_reference import env_with_reference_data

    out, stamp = work / "sdk_way.jsonl", work / "sdk_way.timing.json"
    digest = hashlib.sha256(data.read_bytes()).hexdigest()
    if reuse and stamp.exists():
        saved = json.loads(stamp.read_text())
        if saved["pairs_sha256"] == digest:
            print(f"(SDK way: values and times re-read from the run of {saved['at']} on these same pairs)")
            return saved["wall"], saved["cpu"], out
    env = env_with_reference_data()  # NLTK data for the SDK way (punkt_tab, perluniprops, WordNet), offline
    wall, cpu = run_timed([sys.executable, "-c", SDK_WAY, str(data), str(out)], env)
    stamp.write_text(json.dumps({"pairs_sha256": digest, "wall": wall, "cpu": cpu,
                                 "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}))
    return wall, cpu, out


TARGET = 10.0  # issue 8: the whole CLI run at least 10x faster than the SDK's way, every value equal


def measure(unit: str, n: int, work: Path, reuse: bool) -> tuple[float, float, int, float]:
    """Time both sides on ``n`` pairs of ``unit``; print the figures. Returns (CPU ratio, wall ratio, values
    differing, 1-minute load average before the SDK way ran).

    CPU time is the process's and its children's (user + system), our worker process included."""
    work.mkdir(parents=True, exist_ok=True)
    pairs = make_pairs(n, unit=unit)
    data = work / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in pairs))
    texts = [t for r in pairs for t in (r["response"], r["ground_truth"])]
    non_ascii = sum(not (r["response"].isascii() and r["ground_truth"].isascii()) for r in pairs)
    words = sum(len(t.split()) for t in texts) / len(texts)
    what = {"paragraph": "paragraph k of two models' answers", "answer": "two models' whole answers",
            "short": f"two models' whole answers of at most {SHORT_WORDS} words"}[unit]
    print(f"\n== {unit}: {len(pairs)} pairs from WildBench answers ({what} to one session, perturbed); "
          f"{len(set(texts))} distinct texts of {len(texts)}; {words:.0f} words per text on average; "
          f"{non_ascii} pairs with a non-ASCII character")
    quiet = os.getloadavg()  # before anything of ours runs (our own processes raise it afterwards)
    print("load average (1, 5, 15 min) before the SDK way: " + ", ".join(f"{x:.1f}" for x in quiet))
    t_sdk, cpu_sdk, sdk_out = sdk_way(data, work, reuse)
    print(f"{'':<10} {'wall s':>8} {'CPU s':>8} {'rows/s (CPU)':>13}")
    print(f"{'SDK way':<10} {t_sdk:>8.1f} {cpu_sdk:>8.1f} {len(pairs) / cpu_sdk:>13.1f}")
    load = os.getloadavg()
    print("load average (1, 5, 15 min) before our run: " + ", ".join(f"{x:.1f}" for x in load))
    out = work / "out"
    cli = [sys.executable, "-m", "evaluators", "run", str(data), "--metrics", METRICS, "--out", str(out),
           "--db", f"sqlite:///{work / 'bench.db'}", "--fresh", "--quiet"]
    env_ours = {k: v for k, v in os.environ.items() if k != "NLTK_DATA"}
    # our package's bytecode compiled beforehand, as an installed package has it and as the SDK's packages in
    # site-packages have theirs (a checkout run under PYTHONDONTWRITEBYTECODE compiles every module each start)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "evaluators")], check=True,
                   stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONDONTWRITEBYTECODE=""))
    t_ours, cpu_ours = run_timed(cli, env_ours)
    print(f"{'ours (CLI)':<10} {t_ours:>8.1f} {cpu_ours:>8.1f} {len(pairs) / cpu_ours:>13.1f}")
    ours = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()]
    sdk = [json.loads(x) for x in sdk_out.read_text().splitlines()]
    assert len(ours) == len(sdk) == len(pairs)
    compared = differ = 0
    worst = 0.0
    for a, b in zip(ours, sdk):
        for ours_key, sdk_key in KEYS:
            compared += 1
            if a.get(ours_key) != b[sdk_key]:
                differ += 1
                if isinstance(a.get(ours_key), float):
                    worst = max(worst, abs(a[ours_key] - b[sdk_key]))
    print(f"values compared: {compared} ({len(KEYS)} per row); differing (exact float comparison): {differ}; "
          f"max |diff| {worst:.1e}")
    print("load average (1, 5, 15 min) after our run: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    return cpu_sdk / cpu_ours, t_sdk / t_ours, differ, quiet[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=10_000, help="pairs per data set (default 10,000)")
    ap.add_argument("--quick", action="store_true", help="1,000 pairs per data set (a check that it works; "
                    "our fixed start-up weighs more on fewer rows, so the ratios are lower)")
    ap.add_argument("--unit", choices=["paragraph", "answer", "short", "both"], default="both",
                    help="pair paragraph k of two answers, the two whole answers, two short whole answers "
                    f"(at most {SHORT_WORDS} words each), or run paragraphs and whole answers (default)")
    ap.add_argument("--keep", help="folder to keep the pairs, rows.jsonl and the SDK way's values in")
    ap.add_argument("--reuse-sdk", action="store_true",
                    help="with --keep: re-read the SDK way's values and times from an earlier run on the same pairs")
    args = ap.parse_args()
    if not WILDBENCH.is_dir():
        print(f"SKIPPED: WildBench answers not found at {WILDBENCH} (../shared is absent); nothing measured.")
        return
    n = 1_000 if args.quick else args.pairs
    base = Path(args.keep or tempfile.mkdtemp(prefix="evaldash-bench-"))
    units = ["paragraph", "answer"] if args.unit == "both" else [args.unit]
    verdicts = []
    for unit in units:
        cpu, wall, differ, load = measure(unit, n, base / unit, args.reuse_sdk and bool(args.keep))
        ok = wall >= TARGET and differ == 0
        verdicts.append(ok)
        print(f"{unit}: speed-up {wall:.1f}x in wall time ({os.cpu_count()} cores; load average before the bench {load:.1f}"
              f"{', NOT a quiet machine: the wall ratio is not the figure to quote' if load > 0.7 else ''}); "
              f"{cpu:.1f}x in CPU time; {differ} values differ -> {'PASS' if ok else 'FAIL'} "
              f"(target: >= {TARGET:g}x in wall time, 0 differing)")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    sys.exit(0 if all(verdicts) else 1)


if __name__ == "__main__":
    main()
