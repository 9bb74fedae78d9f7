"""Classic metrics vs the reference implementations: rows/s, speed ratio, values that differ.

    python bench/classic.py [--pairs 10000]

Pairs are made offline from the bundled samples: each ground truth against a
perturbed copy of itself or of its response (words dropped, swapped, repeated),
with a fixed seed, so every run measures the same 10,000 pairs. Both sides get
the same tokens (BLEU, GLEU, METEOR) or the same text (ROUGE, tokenized by each).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluators.metrics import bleu, gleu, meteor, rouge  # noqa: E402
from evaluators.metrics._text import _SENT_END, rouge_tokenize, tokenize_words  # noqa: E402
from evaluators.metrics.wordnet import load_wordnet  # noqa: E402


def make_pairs(n: int, seed: int = 13) -> list[tuple[str, str]]:
    rows = [json.loads(x) for x in (ROOT / "data" / "rag_single_turn.jsonl").read_text().splitlines()]
    texts = [t for r in rows for t in (r["response"], r["ground_truth"], r["context"]) if t.isascii()]
    rng = random.Random(seed)
    pairs = []
    while len(pairs) < n:
        truth = rng.choice(texts)
        words = rng.choice([truth, rng.choice(texts)]).split()
        for _ in range(rng.randint(0, 6)):
            op, k = rng.random(), rng.randrange(len(words))
            if op < 0.4 and len(words) > 2:
                del words[k]
            elif op < 0.7:
                j = rng.randrange(len(words))
                words[k], words[j] = words[j], words[k]
            else:
                words.insert(k, rng.choice(truth.split()))
        # a unique tail per pair: no two pairs share a text, so no cache helps across rows
        pairs.append((" ".join(words) + f" (case {len(pairs)})", truth + f" (case {len(pairs)})"))
    return pairs


def timed(fn, items):
    t = time.perf_counter()
    out = [fn(*x) for x in items]
    return out, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=10_000)
    args = ap.parse_args()
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    from nltk.translate.gleu_score import sentence_gleu
    from nltk.translate.meteor_score import meteor_score
    from rouge_score import rouge_scorer

    nltk_tok = NLTKWordTokenizer().tokenize

    def ref_tokens(text):  # what the SDK's word_tokenize does, with our sentence split standing in for Punkt
        return [t for s in _SENT_END.split(text.strip()) if s for t in nltk_tok(s)]

    wn = load_wordnet()
    pairs = make_pairs(args.pairs)
    sm = SmoothingFunction().method4
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    meteor.meteor(["warm"], ["up"])  # load WordNet before timing, for both sides
    meteor_score([["warm"]], ["up"], wordnet=wn)
    token_metrics = {
        "bleu": (lambda r, h: sentence_bleu([r], h, smoothing_function=sm), bleu.sentence_bleu),
        "gleu": (lambda r, h: sentence_gleu([r], h), gleu.sentence_gleu),
        "meteor": (lambda r, h: meteor_score([r], h, wordnet=wn), meteor.meteor),
    }
    cases = {name: (lambda resp, truth, f=f: f(ref_tokens(truth), ref_tokens(resp)),
                    lambda resp, truth, g=g: g(tokenize_words(truth), tokenize_words(resp)))
             for name, (f, g) in token_metrics.items()}
    cases["rougeL"] = (lambda resp, truth: scorer.score(truth, resp)["rougeL"].fmeasure,
                       lambda resp, truth: rouge.rouge_l(rouge_tokenize(truth), rouge_tokenize(resp))["rouge_f1_score"])
    print(f"{len(pairs)} pairs; Python {sys.version.split()[0]}; text in, score out (tokenization included)")
    print(f"{'metric':<8} {'reference rows/s':>17} {'ours rows/s':>12} {'speed-up':>9} {'differ >1e-6':>13} {'max |diff|':>11}")
    for name, (ref_fn, our_fn) in cases.items():
        ref, t_ref = timed(ref_fn, pairs)
        ours, t_ours = timed(our_fn, pairs)
        diffs = [abs(a - b) for a, b in zip(ref, ours)]
        print(f"{name:<8} {len(pairs) / t_ref:>17,.0f} {len(pairs) / t_ours:>12,.0f} {t_ref / t_ours:>8.1f}x "
              f"{sum(d > 1e-6 for d in diffs):>13} {max(diffs):>11.1e}")
    # All five on each row, as the runner computes them (tokens shared between BLEU, GLEU, METEOR)
    from evaluators.registry import get_metric

    specs = [get_metric(m) for m in ("f1_score", "bleu", "gleu", "rouge", "meteor")]
    f1_spec = specs[0]

    def reference_row(resp, truth):
        f1_spec.compute({"response": resp, "ground_truth": truth})  # same SQuAD F1 on both sides
        return [f(resp, truth) for f, _ in cases.values()]

    def our_row(resp, truth):
        row = {"response": resp, "ground_truth": truth}
        return [s.compute(row) for s in specs]

    _, t_ref = timed(reference_row, pairs)
    _, t_ours = timed(our_row, pairs)
    print(f"{'all five':<8} {len(pairs) / t_ref:>17,.0f} {len(pairs) / t_ours:>12,.0f} {t_ref / t_ours:>8.1f}x"
          "   (f1, bleu, gleu, rouge, meteor per row)")
    toks = [(ref_tokens(t), ref_tokens(r)) for r, t in pairs]
    same = sum(tokenize_words(r) == list(b) and tokenize_words(t) == list(a) for (r, t), (a, b) in zip(pairs, toks))
    print(f"\ntokenizer: ours equals NLTKWordTokenizer on {same}/{len(pairs)} pairs")
    print(f"{'metric':<8} {'same tokens: reference rows/s':>30} {'ours rows/s':>12} {'speed-up':>9}")
    for name, (f, g) in token_metrics.items():
        _, t_ref = timed(f, toks)
        _, t_ours = timed(g, toks)
        print(f"{name:<8} {len(toks) / t_ref:>30,.0f} {len(toks) / t_ours:>12,.0f} {t_ref / t_ours:>8.1f}x")


if __name__ == "__main__":
    main()
