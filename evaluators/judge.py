"""The one client that talks to a judge model.

OpenAI, Azure OpenAI, or any OpenAI-compatible server (vLLM, Ollama, llama.cpp)
by base URL, through the ``openai`` package. Bounded retries with exponential
backoff honour ``Retry-After`` on 429, 5xx, timeouts and connection errors.

Keys go only where they belong (:func:`resolve_api_key`): ``OPENAI_API_KEY`` only to
OpenAI itself, ``AZURE_OPENAI_API_KEY`` only to ``AZURE_OPENAI_ENDPOINT``, and any other
URL only the key given for it. A server operator can name judges in a TOML file
(:func:`named_judges`) whose URL, model and key users pick but cannot redirect.
No key is ever stored.
"""
from __future__ import annotations

import asyncio
import email.utils
import math
import os
import random
import re
import time
import tomllib
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from .errors import UsageError

PROVIDERS = ("openai", "azure", "compatible")
# A server's Retry-After is followed as given, up to this many seconds.
MAX_RETRY_AFTER = 120.0
# Where OPENAI_API_KEY may go: OpenAI itself, nowhere else.
OPENAI_URL = "https://api.openai.com/v1"
DEFAULT_API_VERSION = "2024-10-21"
# The one call that checks a judge before a run (reachable, key accepted, model exists).
PROBE_PROMPT = "evaldash judge check: reply with the single word OK."


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


@dataclass
class JudgeReply:
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_ms: float
    attempts: int
    finish_reason: str | None = None  # why the judge stopped ("stop", "length"...), as the SDK records it


class JudgeError(Exception):
    """A call that failed for good (after retries, or at once when retrying cannot help).

    Attributes:
        attempts: calls made.
        status: the last HTTP status, if the server answered with one.
        answered: the server answered (a reply we could not use), so it is reachable.
    """

    def __init__(self, message: str, attempts: int = 1, status: int | None = None, answered: bool = False):
        super().__init__(message)
        self.attempts = attempts
        self.status = status
        self.answered = answered


class JudgeUnavailable(UsageError):
    """The judge check before a run failed: wrong URL, key or model. ``attempts``: calls it made."""

    def __init__(self, message: str, attempts: int = 1):
        super().__init__(message)
        self.attempts = attempts


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
    if config.provider == "openai":
        if config.base_url and _norm_url(config.base_url) != _norm_url(OPENAI_URL):
            return None  # OPENAI_API_KEY is OpenAI's; another server gets only a key given for it
        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            raise UsageError("no API key for the OpenAI judge: set OPENAI_API_KEY (or pick a compatible base URL)")
        return key
    if config.provider == "azure":
        env_endpoint = os.environ.get("AZURE_OPENAI_ENDPOINT")
        endpoint = config.azure_endpoint or env_endpoint
        key = os.environ.get("AZURE_OPENAI_API_KEY")
        if config.base_url or not env_endpoint or _norm_url(endpoint) != _norm_url(env_endpoint):
            raise UsageError(f"no API key for the Azure endpoint {judge_url(config)}: AZURE_OPENAI_API_KEY is sent "
                             "only to AZURE_OPENAI_ENDPOINT; give a key for this endpoint")
        if not key:
            raise UsageError("no API key for the Azure judge: set AZURE_OPENAI_API_KEY")
        return key
    return None  # Ollama, vLLM and llama.cpp need none unless configured with one


def _retry_after(exc: Exception) -> float | None:
    """Seconds a server asked us to wait; None when absent or unreadable (garbage is ignored, not raised)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            v = float(ms) / 1000
            if math.isfinite(v) and v >= 0:
                return v
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        v = float(value)
        return v if math.isfinite(v) and v >= 0 else None
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed is None:
        return None
    if parsed.tzinfo is None:
        import datetime as dt

        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return max(0.0, parsed.timestamp() - time.time())


class JudgeClient:
    """Async chat-completion client with retries; one per run.

    Args:
        config: the judge (a named judge is resolved here, from the server's configuration).
        api_key: a key given for this judge (see :func:`resolve_api_key` for where keys may go).
    """

    def __init__(self, config: JudgeConfig, api_key: str | None = None, limiter: Any = None):
        import openai

        self.limiter = limiter  # a ratelimit.RateLimiter every attempt goes through, or None

        key = resolve_api_key(config, api_key)
        config = config.resolved()
        self.config = config
        self.url = judge_url(config)
        self._openai = openai
        # With no key, send no Authorization header at all: the client would otherwise fill one in
        # from OPENAI_API_KEY, which belongs to OpenAI alone.
        self._extra_headers = {"Authorization": openai.Omit()} if key is None else None
        common = dict(api_key=key or "no-key", max_retries=0, timeout=config.timeout)  # we retry, honouring Retry-After
        if config.provider == "azure":
            endpoint = config.azure_endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT")
            if not endpoint and not config.base_url:
                raise UsageError("Azure judge needs an endpoint: set AZURE_OPENAI_ENDPOINT or --judge-base-url")
            if config.base_url:
                self._client = openai.AsyncAzureOpenAI(base_url=config.base_url, api_version=config.api_version, **common)
            else:
                self._client = openai.AsyncAzureOpenAI(azure_endpoint=endpoint, api_version=config.api_version, **common)
        else:
            # explicit URL: the client would otherwise take OPENAI_BASE_URL from the environment
            self._client = openai.AsyncOpenAI(base_url=config.base_url or OPENAI_URL, **common)

    def _retryable(self, exc: Exception, probing: bool = False, attempt: int = 1) -> bool:
        o = self._openai
        if isinstance(exc, o.APITimeoutError):
            return not probing or attempt < 2  # the check waits out one slow answer, not a silent URL
        if isinstance(exc, o.APIConnectionError):
            return not probing  # a refused connection at the check is a wrong URL: say so at once
        if isinstance(exc, (o.RateLimitError, o.InternalServerError)):
            return True
        return isinstance(exc, o.APIStatusError) and (exc.status_code in (408, 409, 429) or exc.status_code >= 500)

    def _delay(self, attempt: int, exc: Exception) -> float:
        hinted = _retry_after(exc)
        if hinted is not None:
            return min(hinted, MAX_RETRY_AFTER)
        backoff = min(self.config.backoff_max, self.config.backoff_base * 2 ** attempt)
        return backoff * (0.5 + random.random() / 2)  # jitter spreads retries of concurrent calls

    async def complete(self, messages: list[dict[str, str]], _probing: bool = False) -> JudgeReply:
        """One chat completion, retried as configured.

        Raises:
            JudgeError: the last failure, once retries are spent or when it cannot be retried;
                anything unexpected (a reply the client cannot read, a bad header) too, with its reason.
        """
        cfg = self.config
        params: dict[str, Any] = dict(model=cfg.model, messages=messages, temperature=cfg.temperature,
                                      max_tokens=cfg.max_tokens)
        if cfg.seed is not None:
            params["seed"] = cfg.seed
        if self._extra_headers:
            params["extra_headers"] = self._extra_headers
        limiter = self.limiter
        tokens = sum(len(str(m.get("content", ""))) for m in messages) / 4 + 120  # for a tpm budget
        attempt = 0
        while True:
            attempt += 1
            if limiter is not None:
                await limiter.acquire(tokens)
            start = time.perf_counter()
            try:
                if limiter is not None:
                    try:
                        raw = await self._client.chat.completions.with_raw_response.create(**params)
                    except asyncio.CancelledError:
                        limiter.release(None)
                        raise
                    except Exception as exc:
                        response = getattr(exc, "response", None)
                        status = getattr(exc, "status_code", None)
                        hinted = _retry_after(exc)
                        if hinted is None and status == 429:
                            hinted = self._delay(attempt - 1, exc)
                        limiter.release(status, getattr(response, "headers", None), hinted)
                        raise
                    limiter.release(raw.status_code, raw.headers)
                    resp = raw.parse()
                else:
                    resp = await self._client.chat.completions.create(**params)
                latency = (time.perf_counter() - start) * 1000
                choice = resp.choices[0] if resp.choices else None
                text = choice.message.content if choice and choice.message else None
                finish = getattr(choice, "finish_reason", None) if choice else None
                usage = resp.usage
                pt, ct = getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # openai raises a family of types; anything else is a reply we cannot read
                if not isinstance(exc, self._openai.OpenAIError):
                    raise JudgeError(f"unreadable reply from the judge: {_describe(exc)}", attempt,
                                     answered=True) from None
                if attempt <= cfg.max_retries and self._retryable(exc, _probing, attempt):
                    if limiter is None or getattr(exc, "status_code", None) != 429:
                        await asyncio.sleep(self._delay(attempt - 1, exc))
                    # a 429 under a limiter: it pauses every call until Retry-After, this one included
                    continue
                status = getattr(exc, "status_code", None)
                answered = isinstance(exc, self._openai.APIResponseValidationError)
                raise JudgeError(_describe(exc), attempt, status, answered) from None
            if not text:
                raise JudgeError("the judge returned an empty reply", attempt, 200, answered=True)
            return JudgeReply(text, pt if isinstance(pt, int) else None, ct if isinstance(ct, int) else None,
                              latency, attempt, finish if isinstance(finish, str) else None)

    async def probe(self) -> int:
        """One call that checks the judge before a run: reachable, key accepted, model exists.

        Returns:
            The calls it made (count them).
        Raises:
            JudgeUnavailable: one line naming the judge's URL and model and what went wrong.
        """
        try:
            reply = await self.complete([{"role": "user", "content": PROBE_PROMPT}], _probing=True)
            return reply.attempts
        except JudgeError as e:
            if e.answered:
                return e.attempts  # it answered: reachable, key accepted, model known
            where = f"the judge at {self.url} (model '{self.config.model}')"
            if e.status in (401, 403):
                what = f"{where} refused the key (HTTP {e.status})"
            elif e.status == 404:
                what = f"{where} answered 404: the model does not exist there, or the URL is wrong"
            elif e.status is None:
                what = f"cannot reach {where}: {e}"
            else:
                what = f"{where} failed its check: {e}"
            raise JudgeUnavailable(f"judge check failed: {what}", e.attempts) from None

    async def aclose(self) -> None:
        await self._client.close()


def check_judge(config: JudgeConfig, api_key: str | None = None) -> int:
    """Check a judge as a run would before judging (e.g. a dashboard's "test the judge" button).

    Args:
        config: the judge (a named judge is resolved from the server's configuration).
        api_key: a key given for it (same rules as a run: :func:`resolve_api_key`).
    Returns:
        The calls made.
    Raises:
        JudgeUnavailable: wrong URL, key or model (one line); UsageError: no key where one is needed.
    """

    async def go() -> int:
        client = JudgeClient(config, api_key)
        try:
            return await client.probe()
        finally:
            await client.aclose()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(go())
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # called from inside an event loop (a notebook)
        return pool.submit(asyncio.run, go()).result()


def _describe(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    msg = str(exc).splitlines()[0][:300] if str(exc) else name
    return f"{name} (HTTP {status}): {msg}" if status else f"{name}: {msg}"
