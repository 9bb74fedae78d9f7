"""Our tokenizers against the Azure AI Evaluation SDK's (NLTK's, rouge-score's), token for token.

Expected values come from outside our code: NLTK's own doctests (printed in its
source), and NLTK / rouge-score run on the same text with the same data.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluators.metrics._nist import international_tokenize, perluniprops
from evaluators.metrics._punkt import sent_tokenize
from evaluators.metrics._text import (rouge_tokenize, sdk_word_tokenize, treebank_tokenize, treebank_tokenize_sentences, unicode_word_tokenize)
from tests.sdk_reference import sdk_tokenize, use_reference_data

pytestmark = pytest.mark.no_store  # opens no store: deselected in the PostgreSQL pass

WILDBENCH = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "wildbench" / "eval_results"

# Texts that split differently under a rule-of-thumb sentence splitter, or that take the NIST path.
HARD = [
    # abbreviations, initials, several sentences
    "Dr. Smith went to Washington. he said it was fine.", "I called Dr. Jones. I called Dr. Jones.",
    "Use e.g. a list, i.e. something short. Then stop.", "The U.S. army left at 5 p.m. on Jan. 3. Mr. Jones stayed.",
    "See Fig. 3 and Sec. 4.2. Results follow.", "Prof. J. R. R. Tolkien wrote it in 1937. It sold well.",
    "It costs $3.50. That is cheap! Is it? yes.", "Version 2.0. was released. it works.",
    # lower-case sentence starts, quotes, brackets, ellipses
    'He said "hi." then left. "Why?" she asked.', "'Twas brillig... and the slithy toves. ok.",
    "(This is a note.) Another sentence. [And a third.]", "The end.\") New start.", "Wait... what?! no way.",
    # markdown and newlines as in model answers
    "## Steps\n\n1. Install it.\n2. Run it.\n\n**Note:** it's done.\n- item one\n- item two",
    "Here's the code:\n```python\nprint('hi')\n```\nThat's it.", "A\tB  C\n\n\nD.", "   leading space. and more.",
    # contractions and Treebank specials
    "I can't go--won't go! Don't you cannot gonna gimme lemme wanna 'tis", "It's 5:30, isn't it? x:y, a,b 1,000",
    "Price: $3.50 & 20% off* email@x.com #tag", "''Double'' ``quotes`` and 'single' ones.",
    # ASCII control characters that Python's re and NLTK's regex engine treat differently
    "one\x1ctwo. three\x1f four.", "nul\x00byte. here.",
    # non-ASCII: the NIST path
    "“Curly quotes” and an em dash — here.", "Café au lait, s’il vous plaît. Dr. Müller’s résumé…",
    "Он сказал: «Привет, мир!» и ушёл.", "東京は日本の首都です。人口は約1400万人。", "中文文本，没有空格。Mixed with English.",
    "Emoji 😀 and symbols ™ © ± ≥ €5.", "Tom &amp; Jerry &lt;3 &quot;x&quot;", "skip <skipped> this\u2028line",
    "x\u00a0y non-breaking\u2009thin", "Ελληνικά: αλφα, βήτα. Ok.", "עברית ועוד.", "हिन्दी में लिखा गया पाठ।",
]


@pytest.fixture(scope="module", autouse=True)
def reference_data():
    use_reference_data()


# --- the data: NLTK's own doctests hold outputs of NLTK's real data files --------------------

def test_nist_tokenizer_matches_nltk_doctests():
    # From nltk/tokenize/nist.py's NISTTokenizer docstring (outputs of the real perluniprops data).
    albb = "Alibaba Group Holding Limited (Chinese: 阿里巴巴集团控股 有限公司) is a Chinese e-commerce company..."
    amz = "Amazon.com, Inc. (/ˈæməzɒn/) is an American electronic commerce..."
    rkt = ("Rakuten, Inc. (楽天株式会社 Rakuten Kabushiki-gaisha) is a Japanese electronic commerce and Internet "
           "company based in Tokyo.")
    assert international_tokenize(albb)[:10] == ["Alibaba", "Group", "Holding", "Limited", "(", "Chinese", ":",
                                                  "\u963f\u91cc\u5df4\u5df4\u96c6\u56e2\u63a7\u80a1",
                                                  "\u6709\u9650\u516c\u53f8", ")"]
    assert international_tokenize(amz)[:10] == ["Amazon", ".", "com", ",", "Inc", ".", "(", "/", "\u02c8\xe6", "m"]
    assert international_tokenize(rkt)[:10] == ["Rakuten", ",", "Inc", ".", "(", "\u697d\u5929\u682a\u5f0f\u4f1a\u793e",
                                                 "Rakuten", "Kabushiki", "-", "gaisha"]
    assert international_tokenize("this is a foo\u2604sentence.") == ["this", "is", "a", "foo", "\u2604", "sentence", "."]


def test_perluniprops_match_nltk_doctests():
    # From nltk/corpus/reader/wordlist.py's UnicharsCorpusReader.chars docstring.
    assert perluniprops("Open_Punctuation")[:5] == ["(", "[", "{", "\u0f3a", "\u0f3c"]
    assert perluniprops("Currency_Symbol")[:5] == ["$", "\xa2", "\xa3", "\xa4", "\xa5"]


@pytest.mark.parametrize("text,expected", [
    # From nltk/test/tokenize.doctest (word_tokenize with the real English punkt_tab model).
    ("I called Dr. Jones. I called Dr. Jones.", ["I", "called", "Dr.", "Jones", ".", "I", "called", "Dr.", "Jones", "."]),
    ("Ich muss unbedingt daran denken, Mehl, usw. fur einen Kuchen einzukaufen. Ich muss.",
     ["Ich", "muss", "unbedingt", "daran", "denken", ",", "Mehl", ",", "usw", ".", "fur", "einen", "Kuchen",
      "einzukaufen", ".", "Ich", "muss", "."]),
    ("There were 300,000, but that wasn't enough.", ["There", "were", "300,000", ",", "but", "that", "was", "n't",
                                                      "enough", "."]),
    ("It's more'n enough.", ["It", "'s", "more", "'n", "enough", "."]),
    ("\"We beat some pretty good teams to get here,\" Slocum said.",
     ["``", "We", "beat", "some", "pretty", "good", "teams", "to", "get", "here", ",", "''", "Slocum", "said", "."]),
])
def test_word_tokenize_matches_nltk_doctests(text, expected):
    assert sdk_word_tokenize(text) == expected


# --- our code against NLTK's, on the same data ---------------------------------------------

@pytest.mark.parametrize("text", HARD)
def test_sdk_tokens_equal_the_sdk(text):
    assert sdk_word_tokenize(text) == sdk_tokenize(text)


@pytest.mark.parametrize("text", [t for t in HARD if t.isascii()])
def test_punkt_sentences_equal_nltk(text):
    import nltk

    assert sent_tokenize(text) == nltk.sent_tokenize(text)


@pytest.mark.parametrize("text", [t for t in HARD if t.isascii()])
def test_treebank_in_one_pass_equals_sentence_by_sentence(text):
    from nltk.tokenize import NLTKWordTokenizer

    sentences = sent_tokenize(text)
    expected = [t for s in sentences for t in NLTKWordTokenizer().tokenize(s)]
    assert treebank_tokenize_sentences(sentences) == expected
    assert [t for s in sentences for t in treebank_tokenize(s)] == expected


def _wildbench_texts(limit: int) -> list[str]:
    if not WILDBENCH.is_dir():
        pytest.skip(f"WildBench answers not found at {WILDBENCH} (../shared absent)")
    texts = []
    for f in sorted(WILDBENCH.rglob("*.json")):
        texts += [r["model_output"] for r in json.loads(f.read_text()) if r.get("model_output")]
    ascii_, other = [t for t in texts if t.isascii()], [t for t in texts if not t.isascii()]
    assert len(ascii_) >= limit and len(other) >= limit // 2, "fewer WildBench answers than expected"
    return ascii_[:limit] + other[: limit // 2]


def test_sdk_tokens_equal_the_sdk_on_real_answers():
    """Real model answers (markdown, code, lists, non-ASCII): every token equal."""
    texts = _wildbench_texts(120)
    differ = [t[:60] for t in texts if sdk_word_tokenize(t) != sdk_tokenize(t)]
    assert differ == [], f"{len(differ)} of {len(texts)} differ"


@pytest.mark.parametrize("text", HARD + ["K is a Kelvin sign", "İstanbul ǅ ﬁ ß", "ROUGE-L 2.0: a_b c-d"])
def test_rouge_tokens_equal_rouge_score(text):
    from rouge_score.tokenize import tokenize

    assert rouge_tokenize(text) == tokenize(text, None)


# --- the unicode option ----------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("東京は日本の首都です。", ["東", "京", "は", "日", "本", "の", "首", "都", "で", "す", "。"]),
    ("Café “au lait”, s’il", ["Café", "“", "au", "lait", "”", ",", "s", "’", "il"]),
    ("हिन्दी में", ["हिन्दी", "में"]),   # vowel signs (marks) stay inside the word
    ("abc東京123", ["abc", "東", "京", "123"]),
])
def test_unicode_word_tokens(text, expected):
    assert unicode_word_tokenize(text) == expected


def test_unicode_rouge_tokens_keep_other_scripts():
    assert rouge_tokenize("Привет, МИР! 東京", "unicode") == ["привет", "мир", "東", "京"]
    assert rouge_tokenize("Привет, МИР! 東京") == []  # the SDK's: nothing left


@pytest.mark.parametrize("default,option", [("bleu", "bleu_unicode"), ("gleu", "gleu_unicode"),
                                            ("meteor", "meteor_unicode"), ("rouge", "rouge_unicode")])
def test_unicode_option_is_recorded_in_the_signature(default, option):
    from evaluators.core.registry import get_metric

    sdk, uni = get_metric(default), get_metric(option)
    assert "tok:sdk" in sdk.signature() and "tok:unicode" in uni.signature()
    assert sdk.signature().replace(default, "X", 1).replace("tok:sdk", "tok:unicode") == \
        uni.signature().replace(option, "X", 1)  # the tokenizer is the only setting that differs
    japanese = {"response": "東京は日本の首都です。", "ground_truth": "東京は日本の首都です。人口は多い。"}
    assert uni.compute(japanese)[uni.primary] > 0.0  # characters compared one by one
    assert "_note" not in uni.compute(japanese)


@pytest.mark.parametrize("name", ["bleu", "gleu", "meteor", "rouge", "rouge2"])
def test_note_when_the_sdk_tokenizer_cannot_compare_words(name):
    from evaluators.core.registry import get_metric

    spec = get_metric(name)
    japanese = {"response": "東京は日本の首都です。", "ground_truth": "東京は日本の首都です。人口は多い。"}
    note = spec.compute(japanese)["_note"]
    assert "response and ground_truth" in note and "_unicode" in note
    english = {"response": "Café is open. Dr. Smith said “hi”.", "ground_truth": "The café is open."}
    assert "_note" not in spec.compute(english)  # non-ASCII, but its words are compared


def _wildbench_paragraphs(limit: int) -> list[str]:
    """Blank-line separated paragraphs of real answers (the bench's paragraph-sized texts), ASCII ones."""
    import re

    paras = []
    for t in _wildbench_texts(400):
        paras += [p.strip() for p in re.split(r"\n\s*\n", t) if len(p.split()) >= 8 and p.isascii()]
    assert len(paras) >= limit, "fewer WildBench paragraphs than expected"
    return paras[:limit]


@pytest.mark.parametrize("text", ["", "   ", "no sentence end here  \n", "\t two lines\nno end \n\n", "a;b: c - d",
                                  "Ends with a period.", "Dr. Smith? Yes! e.g. this."])
def test_punkt_without_candidate_breaks_equals_nltk(text):
    """Our shortcut for text without . ? ! (Punkt's only break characters) gives NLTK's sentences."""
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    from evaluators.metrics._punkt import english_params

    assert sent_tokenize(text) == PunktSentenceTokenizer(english_params()).tokenize(text)


def test_sentences_and_tokens_equal_nltk_on_real_paragraphs():
    """2,000 real answer paragraphs, each split twice (the second time from the remembered break
    decisions): sentences equal NLTK's Punkt, tokens equal NLTK's Treebank tokenizer sentence by sentence."""
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    from evaluators.metrics._punkt import english_params

    punkt, treebank = PunktSentenceTokenizer(english_params()), NLTKWordTokenizer()
    paras = _wildbench_paragraphs(2000)
    for _ in range(2):
        differ = []
        for p in paras:
            sentences = sent_tokenize(p)
            if sentences != punkt.tokenize(p) or \
                    treebank_tokenize_sentences(sentences) != [t for s in sentences for t in treebank.tokenize(s)]:
                differ.append(p[:60])
        assert differ == [], f"{len(differ)} of {len(paras)} differ"


def test_meteor_equals_nltk_exactly_on_real_paragraph_pairs():
    """METEOR of 300 pairs of real paragraphs (neighbours: varied words, some shared) equals NLTK's
    ``meteor_score`` as the SDK calls it, float for float."""
    from nltk.translate.meteor_score import meteor_score

    from evaluators.metrics.meteor import meteor
    from evaluators.metrics.wordnet import load_wordnet

    paras = _wildbench_paragraphs(301)
    toks = [sdk_word_tokenize(p) for p in paras]
    got = [meteor(toks[i - 1], toks[i]) for i in range(1, len(toks))]
    expected = [meteor_score([toks[i - 1]], toks[i], wordnet=load_wordnet(), alpha=0.9, beta=3.0, gamma=0.5)
                for i in range(1, len(toks))]
    assert sum(v > 0.1 for v in expected) > 30  # the pairs share words: the alignment is exercised
    assert got == expected


# Apostrophes where the rules run from the apostrophe (_text._APOSTROPHE_FIRST) could differ from NLTK's
# character-first rules: after a space, an apostrophe or a sentence break, doubled, at a text's start, cased.
APOSTROPHES = ["x'll'll y", "nn't go", "I can't", "Can'T stop. N'T n't 'n't", "it's 'quoted' 'tis", "'s start",
               "O'Neil's d' x", "''x'' y'' 'd", "a 'b' c's", "rock 'n' roll", "DON'T DOn'T", "ya'll 're 've 'LL",
               "He said 'hello' and she'd gone.", "isn't it? 'Yes'.", "I'M sure 'M 'S we'D", "it' s' x'",
               "'Tis. 'twas 're", "tell'em 'em"]


@pytest.mark.parametrize("text", APOSTROPHES)
def test_apostrophe_rules_equal_nltk(text):
    from nltk.tokenize import NLTKWordTokenizer

    sentences = sent_tokenize(text)
    assert treebank_tokenize_sentences(sentences) == [t for s in sentences for t in NLTKWordTokenizer().tokenize(s)]
