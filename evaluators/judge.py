"""The one client that talks to a judge model.

OpenAI, Azure OpenAI, or any OpenAI-compatible server (vLLM, Ollama, llama.cpp)
by base URL, through the ``openai`` package. Bounded retries with exponential
backoff honour ``Retry-After`` on 429, 5xx, timeouts and connection errors.
The API key comes from the caller or the environment and is never stored.
"""
from __future__ import annotations

import asyncio
import email.utils
import os
import random
import time
import tomllib
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from .errors import UsageError

PROVIDERS = ("openai", "azure", "compatible")
# A server's Retry-After is followed as given, up to this many seconds.
MAX_RETRY_AFTER = 120.0


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
        judge_name: the operator's named judge this config was built from (see :func:`named_judges`);
            its key comes only from that judge's ``key_env``.
    """

    model: str = "gpt-4o-mini"
    provider: str = "openai"
    base_url: str | None = None
    azure_endpoint: str | None = None
    api_version: str = "2024-10-21"
    temperature: float = 0.0
    max_tokens: int = 800
    seed: int | None = None
    timeout: float = 60.0
    max_retries: int = 5
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    concurrency: int = 8
    judge_name: str | None = None

    def __post_init__(self):
        if self.provider not in PROVIDERS:
            raise UsageError(f"judge provider must be one of {', '.join(PROVIDERS)}, got '{self.provider}'")
        if self.concurrency < 1:
            raise UsageError("concurrency must be at least 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "JudgeConfig":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

    def identity(self) -> dict[str, Any]:
        """What decides a reply (for cache keys and run fingerprints): not timeouts or concurrency."""
        return {"model": self.model, "provider": self.provider, "base_url": self.base_url or self.azure_endpoint,
                "temperature": self.temperature, "max_tokens": self.max_tokens, "seed": self.seed}

    def with_(self, **changes: Any) -> "JudgeConfig":
        return replace(self, **changes)


@dataclass
class JudgeReply:
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_ms: float
    attempts: int


class JudgeError(Exception):
    """A call that failed for good (after retries, or at once when retrying cannot help)."""

    def __init__(self, message: str, attempts: int = 1):
        super().__init__(message)
        self.attempts = attempts


@dataclass(frozen=True)
class NamedJudge:
    """A judge the server's operator configured: users pick it by name, never see its URL or key.

    Attributes:
        name: what users pick.
        provider, model, base_url, azure_endpoint, api_version: as in :class:`JudgeConfig`.
        key_env: the server environment variable holding its key (None: a server that needs none).
    """

    name: str
    provider: str = "compatible"
    model: str = "gpt-4o-mini"
    base_url: str | None = None
    azure_endpoint: str | None = None
    api_version: str = "2024-10-21"
    key_env: str | None = None


def named_judges() -> dict[str, NamedJudge]:
    """The operator's named judges: one ``[NAME]`` table each in ``$EVAL_JUDGES`` or ``$EVAL_HOME/judges.toml``."""
    path = os.environ.get("EVAL_JUDGES") or Path(os.environ.get("EVAL_HOME") or Path.home() / ".evaldash") / "judges.toml"
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"{path}: not a valid judges file: {e}") from None
    fields = NamedJudge.__dataclass_fields__
    out = {}
    for name, table in data.items():
        if not isinstance(table, dict):
            raise UsageError(f"{path}: judge '{name}' must be a table")
        unknown = set(table) - set(fields)
        if unknown:
            raise UsageError(f"{path}: judge '{name}': unknown key(s) {', '.join(sorted(unknown))}")
        out[name] = NamedJudge(**{**table, "name": name})
    return out


def resolve_api_key(config: JudgeConfig, api_key: str | None = None) -> str:
    """The key to use: given, else from the environment; a local server needs none."""
    if config.judge_name:  # an operator's judge: its own variable, nothing typed, nothing else
        judge = named_judges().get(config.judge_name)
        if judge is None:
            raise UsageError(f"no named judge '{config.judge_name}' is configured on this server")
        return (os.environ.get(judge.key_env) if judge.key_env else None) or "unused"
    if api_key:
        return api_key
    env = "AZURE_OPENAI_API_KEY" if config.provider == "azure" else "OPENAI_API_KEY"
    key = os.environ.get(env)
    if key:
        return key
    if config.provider == "compatible":
        return "unused"  # Ollama, vLLM and llama.cpp accept any key unless configured otherwise
    raise UsageError(f"no API key for the {config.provider} judge: set {env} (or pick a compatible base URL)")


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


class JudgeClient:
    """Async chat-completion client with retries; one per run."""

    def __init__(self, config: JudgeConfig, api_key: str | None = None):
        import openai

        self.config = config
        self._openai = openai
        key = resolve_api_key(config, api_key)
        common = dict(api_key=key, max_retries=0, timeout=config.timeout)  # we retry ourselves, honouring Retry-After
        if config.provider == "azure":
            endpoint = config.azure_endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT")
            if not endpoint and not config.base_url:
                raise UsageError("Azure judge needs an endpoint: set AZURE_OPENAI_ENDPOINT or --judge-base-url")
            if config.base_url:
                self._client = openai.AsyncAzureOpenAI(base_url=config.base_url, api_version=config.api_version, **common)
            else:
                self._client = openai.AsyncAzureOpenAI(azure_endpoint=endpoint, api_version=config.api_version, **common)
        else:
            self._client = openai.AsyncOpenAI(base_url=config.base_url, **common)

    def _retryable(self, exc: Exception) -> bool:
        o = self._openai
        if isinstance(exc, (o.APITimeoutError, o.APIConnectionError, o.RateLimitError, o.InternalServerError)):
            return True
        return isinstance(exc, o.APIStatusError) and exc.status_code in (408, 409, 429) or (
            isinstance(exc, o.APIStatusError) and exc.status_code >= 500)

    def _delay(self, attempt: int, exc: Exception) -> float:
        hinted = _retry_after(exc)
        if hinted is not None:
            return min(hinted, MAX_RETRY_AFTER)
        backoff = min(self.config.backoff_max, self.config.backoff_base * 2 ** attempt)
        return backoff * (0.5 + random.random() / 2)  # jitter spreads retries of concurrent calls

    async def complete(self, messages: list[dict[str, str]]) -> JudgeReply:
        """One chat completion, retried as configured.

        Raises:
            JudgeError: the last failure, once retries are spent or when it cannot be retried.
        """
        cfg = self.config
        params: dict[str, Any] = dict(model=cfg.model, messages=messages, temperature=cfg.temperature,
                                      max_tokens=cfg.max_tokens)
        if cfg.seed is not None:
            params["seed"] = cfg.seed
        attempt = 0
        while True:
            attempt += 1
            start = time.perf_counter()
            try:
                resp = await self._client.chat.completions.create(**params)
            except Exception as exc:  # openai raises a family of types; classify below
                if not isinstance(exc, self._openai.OpenAIError):
                    raise
                if attempt <= cfg.max_retries and self._retryable(exc):
                    await asyncio.sleep(self._delay(attempt - 1, exc))
                    continue
                raise JudgeError(_describe(exc), attempt) from None
            latency = (time.perf_counter() - start) * 1000
            choice = resp.choices[0] if resp.choices else None
            text = choice.message.content if choice and choice.message else None
            if not text:
                raise JudgeError("the judge returned an empty reply", attempt)
            usage = resp.usage
            return JudgeReply(text, getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None),
                              latency, attempt)

    async def aclose(self) -> None:
        await self._client.close()


def _describe(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    msg = str(exc).splitlines()[0][:300] if str(exc) else name
    return f"{name} (HTTP {status}): {msg}" if status else f"{name}: {msg}"
