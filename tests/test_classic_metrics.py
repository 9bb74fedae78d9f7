"""Classic metrics against the reference implementations (NLTK, rouge-score), as the SDK calls them."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from evaluators.metrics import bleu, f1, gleu, meteor, rouge
from evaluators.metrics._text import rouge_tokenize, squad_normalize
from evaluators.core.registry import get_metric
from tests.conftest import ROOT, SINGLE, env_for_subprocess
from tests.sdk_reference import sdk_f1, sdk_scores, sdk_tokenize
from tests.test_sdk_tokenizers import HARD

nltk_bleu = pytest.importorskip("nltk.translate.bleu_score")
from nltk.translate.gleu_score import sentence_gleu as ref_gleu  # noqa: E402
from nltk.translate.meteor_score import meteor_score as ref_meteor  # noqa: E402
from rouge_score import rouge_scorer  # noqa: E402

from evaluators.metrics.wordnet import load_wordnet  # noqa: E402

pytestmark = pytest.mark.no_store  # opens no store: deselected in the PostgreSQL pass

EPS = 1e-12


def english_pairs() -> list[tuple[str, str]]:
    """(response, ground_truth): the sample's pairs, their cross pairs, and edge cases."""
    rows = [json.loads(line) for line in SINGLE.read_text().splitlines()]
    pairs = [(r["response"], r["ground_truth"]) for r in rows]
    pairs += [(rows[i]["response"], rows[i + 1]["context"]) for i in range(len(rows) - 1)]
    pairs += [
        ("the the the the the the the", "the cat is on the mat"),
        ("It is a guide to action which ensures that the military always obeys the commands of the party.",
         "It is a guide to action that ensures that the military will forever heed Party commands."),
        ("a", "a"), ("a b", "b a"), ("", "something"), ("something", ""), ("Dogs running fast.", "The dog runs quickly."),
        ("He bought a car. It was red!", "He purchased an automobile; it was red."),
    ]
    # the hard cases (abbreviations, several sentences, quotes, non-ASCII), each against its neighbour
    pairs += [(HARD[i], HARD[i - 1]) for i in range(1, len(HARD))] + [(t, t) for t in HARD[-6:]]
    return pairs


PAIRS = english_pairs()


def test_corpus_is_large_enough_to_mean_something():
    assert len(PAIRS) >= 60


@pytest.mark.parametrize("response,truth", PAIRS)
def test_bleu_equals_nltk_method4(response, truth):
    h, r = sdk_tokenize(response), sdk_tokenize(truth)
    expected = nltk_bleu.sentence_bleu([r], h, smoothing_function=nltk_bleu.SmoothingFunction().method4)
    assert bleu.sentence_bleu(r, h) == pytest.approx(expected, abs=EPS)


@pytest.mark.parametrize("response,truth", PAIRS)
def test_gleu_equals_nltk(response, truth):
    h, r = sdk_tokenize(response), sdk_tokenize(truth)
    assert gleu.sentence_gleu(r, h) == pytest.approx(ref_gleu([r], h), abs=EPS)


@pytest.mark.parametrize("response,truth", PAIRS)
def test_meteor_equals_nltk(response, truth):
    h, r = sdk_tokenize(response), sdk_tokenize(truth)
    if not h or not r:
        assert meteor.meteor(r, h) == 0.0  # NLTK raises on empty input; we score 0
        return
    expected = ref_meteor([r], h, wordnet=load_wordnet(), alpha=0.9, beta=3.0, gamma=0.5)
    assert meteor.meteor(r, h) == pytest.approx(expected, abs=EPS)


@pytest.mark.parametrize("kind", ["rougeL", "rouge1", "rouge2", "rouge3", "rouge4", "rouge5"])
def test_rouge_equals_rouge_score(kind):
    scorer = rouge_scorer.RougeScorer([kind])
    for response, truth in PAIRS:
        ref = scorer.score(truth, response)[kind]
        t, p = rouge_tokenize(truth), rouge_tokenize(response)
        ours = rouge.rouge_l(t, p) if kind == "rougeL" else rouge.rouge_n(t, p, int(kind[-1]))
        assert ours["rouge_precision"] == pytest.approx(ref.precision, abs=EPS), (response, truth)
        assert ours["rouge_recall"] == pytest.approx(ref.recall, abs=EPS)
        assert ours["rouge_f1_score"] == pytest.approx(ref.fmeasure, abs=EPS)


@pytest.mark.parametrize("a,b,expected", [
    ("ABCBDAB", "BDCABA", 4), ("AGGTAB", "GXTXAYB", 4), ("", "abc", 0), ("abc", "abc", 3), ("abc", "def", 0),
    ("a" * 70, "a" * 65, 65),  # longer than a machine word: the big-int path
])
def test_lcs_length_table(a, b, expected):
    assert rouge.lcs_length(list(a), list(b)) == expected
    assert rouge.lcs_length(list(b), list(a)) == expected


def test_rouge_drops_non_ascii_words_as_the_sdk_does():
    text = "Бесплатная доставка по всей России"
    # rouge-score (vendored by the SDK) keeps only a-z0-9: identical Cyrillic text scores 0.
    assert rouge_scorer.RougeScorer(["rougeL"]).score(text, text)["rougeL"].fmeasure == 0.0
    row = {"response": text, "ground_truth": text}
    out = get_metric("rouge").compute(row)
    assert out["rouge_f1_score"] == 0.0 and "rouge_unicode" in out["_note"]
    assert get_metric("rouge_unicode").compute(row) == {"rouge_precision": 1.0, "rouge_recall": 1.0,
                                                         "rouge_f1_score": 1.0}


@pytest.mark.parametrize("response,truth", PAIRS)
def test_each_metric_equals_the_sdk_on_the_row(response, truth):
    """The registered metrics, text in, against the SDK's computation (tokenization included)."""
    if not sdk_tokenize(response) or not sdk_tokenize(truth):
        pytest.skip("NLTK's METEOR raises on an empty token list; the SDK errors on such rows")
    row = {"response": response, "ground_truth": truth}
    expected = sdk_scores(response, truth)
    ours = {}
    for name in ("f1_score", "bleu", "gleu", "meteor", "rouge"):
        ours.update({k: v for k, v in get_metric(name).compute(row).items() if k != "_note"})
    assert ours.keys() == expected.keys()
    for k in expected:
        assert ours[k] == pytest.approx(expected[k], abs=EPS), k


@pytest.mark.parametrize("response,truth,expected", [
    ("The cat sat", "the cat sat", 1.0),            # case and articles
    ("Paris!", "paris", 1.0),                       # punctuation
    ("a b c d", "c d e f", 0.5),                    # 2 shared of 4 each ('a' is an article: 2/3 & 2/4 -> 4/7)
    ("blue", "red", 0.0),
    ("the", "the", 0.0),                            # only articles: nothing left to share
])
def test_f1_squad_table(response, truth, expected):
    if response == "a b c d":
        expected = 2 * (2 / 3) * (2 / 4) / (2 / 3 + 2 / 4)
    assert f1.f1(response, truth) == pytest.approx(expected, abs=EPS)
    assert sdk_f1(response, truth) == pytest.approx(expected, abs=EPS)


def test_squad_normalize():
    assert squad_normalize("The  Quick, brown fox!") == ["quick", "brown", "fox"]


def test_meteor_without_wordnet_says_so_clearly(tmp_path):
    env = env_for_subprocess(WNSEARCHDIR=str(tmp_path / "none"), XDG_CACHE_HOME=str(tmp_path / "cache"),
                             NLTK_DATA=str(tmp_path / "nltk"), HOME=str(tmp_path))
    p = subprocess.run([sys.executable, "-m", "evaluators", "run", str(SINGLE), "--metrics", "meteor",
                        "--out", str(tmp_path / "out")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    assert "WordNet" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "out" / "rows.jsonl").exists()


TRICKY = [
    'He said "hi" to me.', "I can't go--won't go!", "«Bonjour» dit-il… wait...", "It's 5:30, isn't it?",
    "gimme a break; gonna cannot 'tis", "(a) [b] {c} <d>", "Price: $3.50 & 20% off*", "‘quoted’ “double” — dash – en",
    "'Twas the night", "Don''t stop", "email@x.com #tag", "WANNA GO? Lemme see.", "The end.\")", "x:y, a,b 1,000",
]


def test_tokenizer_equals_nltk_treebank():
    """Our engine runs NLTK's own rules; the tokens must be exactly NLTK's."""
    from nltk.tokenize import NLTKWordTokenizer

    from evaluators.metrics._text import treebank_tokenize, treebank_tokenize_sentences

    ref = NLTKWordTokenizer()
    rows = [json.loads(line) for line in SINGLE.read_text().splitlines()]
    texts = TRICKY + [r[k] for r in rows for k in ("query", "response", "context", "ground_truth")]
    for t in texts:
        assert treebank_tokenize(t) == ref.tokenize(t), t
    # all texts as the "sentences" of one text: one pass of each rule, same tokens
    assert treebank_tokenize_sentences(texts) == [tok for t in texts for tok in ref.tokenize(t)]


def test_wordnet_lemma_names_equal_nltk_synsets():
    """METEOR's synonym lookup reads lemma names straight from the data lines: same names as NLTK."""
    from evaluators.metrics.wordnet import lemma_names
    from tests.test_sdk_tokenizers import WILDBENCH

    wn = load_wordnet()
    words = {w for r, t in PAIRS for w in sdk_tokenize(r) + sdk_tokenize(t)}
    words |= {"dog", "dogs", "ran", "better", "geese", "long", "good", "well", "mice", "best", "ate", "a", "The", "I"}
    if WILDBENCH.is_dir():  # a few thousand words of real answers
        texts = [r["model_output"] for f in sorted(WILDBENCH.rglob("*.json"))[:1] for r in json.loads(f.read_text())]
        words |= {w for t in texts[:150] for w in t.split()}
    assert len(words) > 1000
    for w in words:
        assert lemma_names(w) == {lemma.name() for s in wn.synsets(w) for lemma in s.lemmas()}, w


# Words whose Porter stem turns on NLTK_EXTENSIONS' special cases, "y" as vowel or consonant, the *d and *o
# conditions and each step's overlapping suffixes ("alli" twice over, "logi", "ies" of four letters...).
PORTER_EDGES = ["sky", "skies", "dying", "lying", "tying", "news", "innings", "outings", "cannings", "howe",
                "proceed", "exceed", "succeed", "ties", "pies", "tied", "cried", "agreed", "feed", "bled", "sing",
                "hopping", "falling", "hissing", "fizzed", "failing", "filing", "conflated", "troubled", "sized",
                "happy", "enjoy", "spy", "syzygy", "yyyy", "ayyy", "yay", "toy", "generalli", "radicalli",
                "analogi", "fruitfulli", "relational", "controll", "roll", "probate", "rate", "cease", "y", "yy",
                "ies", "ied", "ing", "eed", "İstanbul", "Running", "ABLE", "abilities", "sensibiliti"]


def _assert_porter_equals_nltk(words):
    from nltk.stem.porter import PorterStemmer

    from evaluators.metrics._porter import stem

    ref = PorterStemmer()  # mode NLTK_EXTENSIONS, as nltk.translate.meteor_score builds it
    bad = [(w, ref.stem(w), stem(w)) for w in words if stem(w) != ref.stem(w)]
    assert not bad, f"{len(bad)} of {len(words)} words stem differently from NLTK's, e.g. {bad[:10]}"


def test_porter_stems_equal_nltk_on_every_wordnet_lemma():
    """Our port of NLTK's Porter stemmer (METEOR's stem stage) on WordNet's ~147,000 lemmas and the edge cases."""
    words = sorted(load_wordnet()._lemma_pos_offset_map) + PORTER_EDGES
    assert len(words) > 140_000
    _assert_porter_equals_nltk(words)


def test_porter_stems_equal_nltk_on_every_wildbench_word():
    """... and on every word of the WildBench answers (split on spaces and as word-character runs)."""
    import re

    from tests.test_sdk_tokenizers import WILDBENCH

    if not WILDBENCH.is_dir():
        pytest.skip(f"WildBench answers not found at {WILDBENCH} (../shared absent)")
    words: set[str] = set()
    for f in sorted(WILDBENCH.rglob("*.json")):
        for r in json.loads(f.read_text()):
            text = r.get("model_output")
            if isinstance(text, str):
                words.update(text.split())
                words.update(re.findall(r"\w+", text))
    assert len(words) > 50_000
    _assert_porter_equals_nltk(sorted(words))


def test_our_wordnet_reader_loads_what_nltk_loads():
    """Our reader skips the OMW mapping and reads index files with Python's file object: same tables."""
    import warnings

    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class NoOmwMap(WordNetCorpusReader):  # NLTK's reader, minus only the OMW mapping (slow; CI time)
        def map_wn(self, version="wordnet"):
            return None

    ours = load_wordnet()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = NoOmwMap(ours.root, None)
    assert ours._lemma_pos_offset_map == ref._lemma_pos_offset_map
    assert ours._exception_map == ref._exception_map
    assert ours._lexnames == ref._lexnames and ours.satellite_offsets == ref.satellite_offsets
    assert ours.map30 is None  # NLTK fills map30 only for custom_lemmas (OMW), which METEOR never calls


def test_wordnet_index_cache_holds_what_nltk_parses(tmp_path, monkeypatch):
    """The parsed index kept between runs (wordnet._index_cache_*) equals NLTK's own parse, is used
    once written, and a damaged cache is parsed again rather than trusted."""
    import warnings

    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    from evaluators.metrics import wordnet as W

    root = load_wordnet().root
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # a cache of our own, empty
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = WordNetCorpusReader.__new__(WordNetCorpusReader)  # NLTK's parse, minus its slow OMW map
        ref.map_wn = lambda version="wordnet": None
        ref.__init__(root, None)
        first = W._reader_class()(root, None)
        second = W._reader_class()(root, None)
    path = W._index_cache_path(root)
    assert path.parent == tmp_path / "evaldash" / "nltk_data" and path.is_file()
    assert first._fresh and not second._fresh  # parsed, then read back
    for r in (first, second):
        assert r._lemma_pos_offset_map == ref._lemma_pos_offset_map
        assert r._exception_map == ref._exception_map and r.satellite_offsets == ref.satellite_offsets
    assert second._exception_map["s"] is second._exception_map["a"]  # shared, as NLTK shares them
    assert second.synsets("geese") == ref.synsets("geese")
    path.write_bytes(b"not marshal")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        third = W._reader_class()(root, None)
    assert third._fresh and third._lemma_pos_offset_map == ref._lemma_pos_offset_map


def test_nltk_imports_without_numpy_and_numpy_imports_afterwards():
    """The classic worker's start: NLTK's optional NumPy import is skipped (as SciPy's); NumPy still imports
    afterwards and NLTK's tokenizer and WordNet reader work as usual."""
    code = (
        "import sys\n"
        "from evaluators.metrics._nltk import import_nltk\n"
        "nltk = import_nltk()\n"
        "print(sorted(m for m in ('numpy', 'scipy') if m in sys.modules))\n"
        "import numpy, scipy.stats\n"
        "from nltk.tokenize.destructive import NLTKWordTokenizer\n"
        "print(numpy.arange(3).sum(), NLTKWordTokenizer().tokenize(\"Don't stop.\"))\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env_for_subprocess(), capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["[]", "3 ['Do', \"n't\", 'stop', '.']"]
