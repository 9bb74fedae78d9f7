"""Which judge, and with which key: ``JudgeConfig`` (provider, model, URL, settings), the operator's named
judges (a TOML file whose URL, model and key users pick but cannot redirect), and :func:`resolve_api_key`,
which gives a key only to the service it belongs to: ``OPENAI_API_KEY`` only to OpenAI itself,
``AZURE_OPENAI_API_KEY`` only to ``AZURE_OPENAI_ENDPOINT``, any other URL only the key given for it.
No key is ever stored."""
from __future__ import annotations

import math
import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from evaluators.core.errors import UsageError


PROVIDERS = ("openai", "azure", "compatible")
# A server's Retry-After is followed as given, up to this many seconds.
MAX_RETRY_AFTER = 120.0
# Where OPENAI_API_KEY may go: OpenAI itself, nowhere else.
OPENAI_URL = "https://api.openai.com/v1"
DEFAULT_API_VERSION = "2024-10-21"
# The one call that checks a judge before a run (reachable, key accepted, model exists).
PROBE_PROMPT = "evaldash judge check: reply with the single word OK."
# Connections per HTTP client in JudgeClient (see there).
SHARD_CONNECTIONS = 8


@dataclass(frozen=True)
class JudgeConfig:
    """Judge model settings. Holds no secret: safe to store and show.

    Attributes:
        model: model (or Azure deployment) name.
        provider: "openai", "azure" or "compatible" (any OpenAI-compatible base URL).
        base_url: server URL, e.g. http://localhost:11434/v1 for Ollama.
        azure_endpoint: Azure resource URL (default: AZURE_OPENAI_ENDPOINT).
        api_version: Azure API version.
        temperature, max_tokens, seed: sampling parameters sent with each call.
        timeout: seconds one call may take before it is retried.
        max_retries: retries after the first attempt.
        concurrency: calls in flight at once.
        rpm, tpm: optional budgets, requests and tokens a minute, that calls never exceed (the
            provider's own limits are followed from its 429s and headers either way).
        judge_name: a judge the server's operator configured (:func:`named_judges`); when set, the
            provider, model, URL and key come from that entry at run time, and a different
            ``base_url`` or ``azure_endpoint`` is refused.
    """

    model: str = "gpt-4o-mini"
    provider: str = "openai"
    base_url: str | None = None
    azure_endpoint: str | None = None
    api_version: str = DEFAULT_API_VERSION
    temperature: float = 0.0
    max_tokens: int = 800
    seed: int | None = None
    timeout: float = 60.0
    max_retries: int = 5
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    concurrency: int = 8
    judge_name: str | None = None
    rpm: float | None = None
    tpm: float | None = None

    def __post_init__(self):
        if self.provider not in PROVIDERS:
            raise UsageError(f"judge provider must be one of {', '.join(PROVIDERS)}, got '{self.provider}'")
        if self.concurrency < 1:
            raise UsageError("concurrency must be at least 1")
        for name in ("rpm", "tpm"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise UsageError(f"{name} must be a positive number of {'requests' if name == 'rpm' else 'tokens'} "
                                 f"a minute, got {v!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "JudgeConfig":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

    def resolved(self) -> "JudgeConfig":
        """This config with a named judge's provider, model, URL and API version filled in (else itself).

        Raises:
            UsageError: the name is not configured, or the config points the named judge elsewhere.
        """
        if not self.judge_name:
            return self
        nj = named_judge(self.judge_name)
        for attr in ("base_url", "azure_endpoint"):
            mine, theirs = getattr(self, attr), getattr(nj, attr)
            if mine and _norm_url(mine) != _norm_url(theirs):
                raise UsageError(f"judge '{nj.name}' is configured on the server; its {attr} cannot be changed "
                                 f"(got {mine})")
        return replace(self, provider=nj.provider, model=nj.model, base_url=nj.base_url,
                       azure_endpoint=nj.azure_endpoint, api_version=nj.api_version or DEFAULT_API_VERSION)

    def for_storage(self) -> "JudgeConfig":
        """What a run spec keeps: a named judge by name and model only (its URL is read at run time)."""
        if not self.judge_name:
            return self
        r = self.resolved()
        return replace(r, base_url=None, azure_endpoint=None)

    def identity(self) -> dict[str, Any]:
        """What decides a reply (for cache keys and run fingerprints): not timeouts or concurrency."""
        cfg = self.resolved() if self.judge_name else self
        return {"model": cfg.model, "provider": cfg.provider, "url": judge_url(cfg),
                "base_url": cfg.base_url, "azure_endpoint": cfg.azure_endpoint,
                "api_version": cfg.api_version if cfg.provider == "azure" else None,
                "temperature": cfg.temperature, "max_tokens": cfg.max_tokens, "seed": cfg.seed,
                "judge_name": cfg.judge_name}

    def with_(self, **changes: Any) -> "JudgeConfig":
        return replace(self, **changes)


def _norm_url(url: str | None) -> str:
    return (url or "").strip().rstrip("/").lower()


def judge_url(config: JudgeConfig) -> str:
    """Where this judge's calls go (for messages; never carries a key)."""
    if config.base_url:
        return config.base_url
    if config.provider == "azure":
        return config.azure_endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT") or "(no Azure endpoint)"
    if config.provider == "openai":
        return OPENAI_URL
    return "(no base URL)"


# ---------------------------------------------------------------------------- named judges
@dataclass(frozen=True)
class NamedJudge:
    """A judge a server operator configured: users pick it by name, never see or redirect its key.

    Attributes:
        name: what users pick.
        provider: "openai", "azure" or "compatible".
        model: model or Azure deployment.
        base_url: server URL (compatible; optional for openai).
        azure_endpoint, api_version: for Azure.
        key_env: the NAME of the environment variable holding its key (None: no key).
    """

    name: str
    provider: str
    model: str
    base_url: str | None = None
    azure_endpoint: str | None = None
    api_version: str | None = None
    key_env: str | None = None


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_named_cache: dict[str, tuple[tuple, dict[str, NamedJudge]]] = {}


def judges_file() -> Path:
    """``EVAL_JUDGES``, else ``$EVAL_HOME/judges.toml`` (default ``~/.evaldash/judges.toml``)."""
    if os.environ.get("EVAL_JUDGES"):
        return Path(os.environ["EVAL_JUDGES"])
    return Path(os.environ.get("EVAL_HOME") or Path.home() / ".evaldash") / "judges.toml"


def named_judges() -> dict[str, NamedJudge]:
    """The judges the operator configured, by name; {} when there is no file.

    The file is TOML, one table per judge::

        [team-llama]
        provider = "compatible"
        base_url = "http://gpu-box:8000/v1"
        model = "llama3.1"
        key_env = "TEAM_LLAMA_KEY"   # the variable's name, never the key

    Raises:
        UsageError: the file is not valid TOML or an entry is incomplete (file and entry named).
    """
    path = judges_file()
    try:
        st = path.stat()
    except FileNotFoundError:
        return {}
    stamp = (st.st_mtime_ns, st.st_size)
    cached = _named_cache.get(str(path))
    if cached and cached[0] == stamp:
        return dict(cached[1])
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: not valid TOML ({e})") from None
    out = {}
    allowed = set(NamedJudge.__dataclass_fields__) - {"name"}
    for name, entry in data.items():
        where = f"{path}, judge '{name}'"
        if not isinstance(entry, dict):
            raise UsageError(f"{where}: expected a table of settings")
        unknown = set(entry) - allowed
        if unknown:
            raise UsageError(f"{where}: unknown setting(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(allowed))}")
        if not all(isinstance(v, str) for v in entry.values()):
            raise UsageError(f"{where}: every setting is a string")
        provider = entry.get("provider", "compatible")
        if provider not in PROVIDERS:
            raise UsageError(f"{where}: provider must be one of {', '.join(PROVIDERS)}")
        if not entry.get("model"):
            raise UsageError(f"{where}: 'model' is required")
        if provider == "compatible" and not entry.get("base_url"):
            raise UsageError(f"{where}: a compatible judge needs 'base_url'")
        if provider == "azure" and not (entry.get("azure_endpoint") or entry.get("base_url")):
            raise UsageError(f"{where}: an Azure judge needs 'azure_endpoint'")
        if entry.get("key_env") and not _ENV_NAME.match(entry["key_env"]):
            raise UsageError(f"{where}: key_env is the NAME of an environment variable, e.g. TEAM_LLAMA_KEY")
        out[name] = NamedJudge(name=name, **{**entry, "provider": provider})
    _named_cache[str(path)] = (stamp, out)
    return dict(out)


def named_judge(name: str) -> NamedJudge:
    judges = named_judges()
    if name not in judges:
        known = ", ".join(sorted(judges)) or f"none: {judges_file()} defines none"
        raise UsageError(f"no judge named '{name}' on this server (configured: {known})")
    return judges[name]


def server_key_env(config: JudgeConfig) -> tuple[str, ...]:
    """The server's environment variables this judge may be given (its key and what locates it); () when the
    judge's URL is not the one those belong to. The one rule :func:`resolve_api_key` and the dashboard's
    workers (:func:`evaluators.run.workers.worker_env`) both follow."""
    if config.provider == "openai":
        if config.base_url and _norm_url(config.base_url) != _norm_url(OPENAI_URL):
            return ()  # OPENAI_API_KEY is OpenAI's; another server gets only a key given for it
        return ("OPENAI_API_KEY",)
    if config.provider == "azure":
        env_endpoint = os.environ.get("AZURE_OPENAI_ENDPOINT")
        endpoint = config.azure_endpoint or env_endpoint
        if config.base_url or not env_endpoint or _norm_url(endpoint) != _norm_url(env_endpoint):
            return ()  # AZURE_OPENAI_API_KEY goes only to AZURE_OPENAI_ENDPOINT
        return ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT")
    return ()


def resolve_api_key(config: JudgeConfig, api_key: str | None = None) -> str | None:
    """The key this judge's calls carry; None sends none.

    A key goes only where it belongs: a named judge's key (its ``key_env``) to that judge;
    ``OPENAI_API_KEY`` only to OpenAI's own URL; ``AZURE_OPENAI_API_KEY`` only to
    ``AZURE_OPENAI_ENDPOINT``; any other URL only the ``api_key`` given for this run.

    Raises:
        UsageError: OpenAI or Azure without a key for it.
    """
    if config.judge_name:
        nj = named_judge(config.judge_name)
        if nj.key_env:
            key = os.environ.get(nj.key_env)
            if not key:
                raise UsageError(f"judge '{nj.name}': the server's environment has no {nj.key_env}")
            return key
        api_key = None  # the operator's judge takes no key from the user
        config = config.resolved()
    if api_key:
        return api_key
    allowed = server_key_env(config)
    if config.provider == "openai":
        if not allowed:
            return None  # OPENAI_API_KEY is OpenAI's; another server gets only a key given for it
        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            raise UsageError("no API key for the OpenAI judge: set OPENAI_API_KEY (or pick a compatible base URL)")
        return key
    if config.provider == "azure":
        if not allowed:
            raise UsageError(f"no API key for the Azure endpoint {judge_url(config)}: AZURE_OPENAI_API_KEY is sent "
                             "only to AZURE_OPENAI_ENDPOINT; give a key for this endpoint")
        key = os.environ.get("AZURE_OPENAI_API_KEY")
        if not key:
            raise UsageError("no API key for the Azure judge: set AZURE_OPENAI_API_KEY")
        return key
    return None  # Ollama, vLLM and llama.cpp need none unless configured with one
