"""The one client that talks to a judge model.

OpenAI, Azure OpenAI, or any OpenAI-compatible server (vLLM, Ollama, llama.cpp)
by base URL, speaking the chat-completions protocol over ``httpx2`` (httpx). Bounded retries
with exponential backoff honour ``Retry-After`` on 429, 5xx, timeouts and connection errors.

Which judge and which key (the configuration, named judges, the rules that keep a key with its
service) are :mod:`evaluators.judge.config`.
"""
from __future__ import annotations

import asyncio
import email.utils
import json
import math
import os
import random
import threading
import time
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from evaluators.core.errors import UsageError
from evaluators.core.redact import redact
from evaluators.judge.config import (MAX_RETRY_AFTER, OPENAI_URL, PROBE_PROMPT, SHARD_CONNECTIONS, JudgeConfig,
                                     judge_url, resolve_api_key)
from evaluators.judge.wire import chat_request, read_completion


@dataclass
class JudgeReply:
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_ms: float
    attempts: int
    finish_reason: str | None = None  # why the judge stopped ("stop", "length"...), as the SDK records it
    cached_tokens: int | None = None  # prompt tokens the provider says it served from its prompt cache


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


# ---------------------------------------------------------------------------- HTTP failures
# Named as the openai client names them, so messages ("InternalServerError (HTTP 500): ...") read
# the same as they always have; raised by JudgeClient's own HTTP path, never by the openai package.
class APIError(Exception):
    status_code: int | None = None
    response: Any = None


class APIConnectionError(APIError):
    pass


class APITimeoutError(APIConnectionError):
    pass


class APIStatusError(APIError):
    def __init__(self, message: str, response: Any):
        super().__init__(message)
        self.response, self.status_code = response, response.status_code


class BadRequestError(APIStatusError): pass  # noqa: E701
class AuthenticationError(APIStatusError): pass  # noqa: E701
class PermissionDeniedError(APIStatusError): pass  # noqa: E701
class NotFoundError(APIStatusError): pass  # noqa: E701
class ConflictError(APIStatusError): pass  # noqa: E701
class UnprocessableEntityError(APIStatusError): pass  # noqa: E701
class RateLimitError(APIStatusError): pass  # noqa: E701
class InternalServerError(APIStatusError): pass  # noqa: E701


_STATUS_ERRORS = {400: BadRequestError, 401: AuthenticationError, 403: PermissionDeniedError, 404: NotFoundError,
                  409: ConflictError, 422: UnprocessableEntityError, 429: RateLimitError}


def _status_error(response: Any) -> APIStatusError:
    status = response.status_code
    cls = _STATUS_ERRORS.get(status) or (InternalServerError if status >= 500 else APIStatusError)
    try:
        body: Any = json.loads(response.content)
    except ValueError:
        body = response.content.decode("utf-8", "replace")[:4000]  # cut to 300 once keys are out (_describe)
    return cls(f"Error code: {status} - {body}", response)


_TLS: dict[bool, Any] = {}  # this process's TLS contexts, made once (loading the CA bundle takes 50-300 ms)


def _tls_context(httpx: Any, verify: bool) -> Any:
    """A TLS context shared by every client: verifying (the CA bundle loaded), or, for a judge reached
    over plain HTTP, one that is never used to connect anywhere."""
    if verify not in _TLS:
        _TLS[verify] = httpx.create_ssl_context(verify=verify)
    return _TLS[verify]


def _tls_needed(endpoint: str) -> bool:
    """Whether a call to ``endpoint`` may use TLS: an https URL, or an https proxy from the environment."""
    proxies = ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
    return endpoint.startswith("https") or any(os.environ.get(k, "").lower().startswith("https") for k in proxies)


def _warm_http_path() -> None:
    """Import now what httpx2's first request would import (anyio's asyncio backend and its streams,
    ~35 ms): made while the judge's check is in flight, the first real calls do not wait for it."""
    try:
        import anyio._backends._asyncio  # noqa: F401
        import anyio.streams.memory  # noqa: F401
        import anyio.streams.stapled  # noqa: F401
    except ImportError:  # another anyio layout: the first request imports what it needs, as before
        pass


class JudgeClient:
    """Async chat-completion client with retries; one per run.

    Speaks the OpenAI chat-completions protocol over ``httpx2`` (httpx) directly (OpenAI, Azure
    OpenAI and compatible servers): one JSON body out, one JSON body in, about a fifth of the CPU per call of
    the ``openai`` client's request and response layers, which a run of thousands of calls on one
    event loop feels. The ``openai`` package is not imported.

    Args:
        config: the judge (a named judge is resolved here, from the server's configuration).
        api_key: a key given for this judge (see :func:`resolve_api_key` for where keys may go).
        limiter: a ratelimit.RateLimiter every attempt goes through, or None.
    """

    def __init__(self, config: JudgeConfig, api_key: str | None = None, limiter: Any = None):
        import httpx2 as httpx  # the httpx the openai package ships with (pinned in requirements.txt)

        headers = self._setup(config, api_key, limiter)
        self._httpx = httpx
        _warm_http_path()
        # Connections in shards of a few per HTTP client: a client's pool looks at each of its
        # connections on every request, which at 64-256 in flight cost more CPU than the call itself.
        # Each call borrows a free slot of one shard, so no shard's pool ever waits.
        shards = -(-(config.concurrency + 4) // SHARD_CONNECTIONS)
        verify = _tls_context(httpx, _tls_needed(self._endpoint))  # plain HTTP: no certificates loaded
        limits = httpx.Limits(max_connections=SHARD_CONNECTIONS, max_keepalive_connections=SHARD_CONNECTIONS)
        self._shards = [httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(self.config.timeout), limits=limits,
                                          verify=verify) for _ in range(shards)]
        self._free = [k for _ in range(SHARD_CONNECTIONS) for k in range(shards)]  # a slot = a shard's index
        self._spill = 0  # more calls in flight than slots (a caller past its concurrency): round robin

    def _setup(self, config: JudgeConfig, api_key: str | None, limiter: Any) -> dict[str, str]:
        """Resolve the judge, its key, URL and query parameters; returns the headers every call sends."""
        self.limiter = limiter
        self.on_sent: Any = None  # called once a request's body is on the wire (the early check says so)
        key = resolve_api_key(config, api_key)
        self._secrets = (key,)  # taken out of every error this client raises: a provider may echo it back
        config = config.resolved()
        self.config = config
        self.url = judge_url(config)
        # With no key, send no key at all (never OPENAI_API_KEY, which belongs to OpenAI alone).
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "evaldash"}
        params = None
        if config.provider == "azure":
            endpoint = config.azure_endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT")
            if not endpoint and not config.base_url:
                raise UsageError("Azure judge needs an endpoint: set AZURE_OPENAI_ENDPOINT or --judge-base-url")
            from urllib.parse import quote, urlsplit

            deployment = f"/deployments/{quote(config.model, safe='')}"
            if config.base_url:  # as the openai client does: the deployment unless the URL names one
                base = config.base_url.rstrip("/")
                self._endpoint = base + ("" if "/deployments" in urlsplit(base).path else deployment)
            else:
                self._endpoint = f"{endpoint.rstrip('/')}/openai{deployment}"
            params = {"api-version": config.api_version}
            if key is not None:
                headers["api-key"] = key
        else:
            # explicit URL: never OPENAI_BASE_URL from the environment
            self._endpoint = (config.base_url or OPENAI_URL).rstrip("/")
            if key is not None:
                headers["Authorization"] = f"Bearer {key}"
        self._endpoint += "/chat/completions"
        self._params = params
        return headers

    def _retryable(self, exc: Exception, probing: bool = False, attempt: int = 1) -> bool:
        if isinstance(exc, APITimeoutError):
            return not probing or attempt < 2  # the check waits out one slow answer, not a silent URL
        if isinstance(exc, APIConnectionError):
            return not probing  # a refused connection at the check is a wrong URL: say so at once
        if isinstance(exc, (RateLimitError, InternalServerError)):
            return True
        return isinstance(exc, APIStatusError) and (exc.status_code in (408, 409, 429) or exc.status_code >= 500)

    def _delay(self, attempt: int, exc: Exception) -> float:
        hinted = _retry_after(exc)
        if hinted is not None:
            return min(hinted, MAX_RETRY_AFTER)
        backoff = min(self.config.backoff_max, self.config.backoff_base * 2 ** attempt)
        return backoff * (0.5 + random.random() / 2)  # jitter spreads retries of concurrent calls

    async def _post(self, body: bytes) -> Any:
        """One attempt: the HTTP response of a 2xx, else the failure as an :class:`APIError`."""
        httpx, free = self._httpx, self._free
        if free:
            slot = free.pop()
        else:
            slot, self._spill = None, self._spill + 1
        try:
            client = self._shards[slot if slot is not None else self._spill % len(self._shards)]
            if self.on_sent is None:
                response = await client.post(self._endpoint, content=body, params=self._params)
            else:
                response = await client.post(self._endpoint, content=body, params=self._params,
                                             extensions={"trace": self._trace})
        except httpx.TimeoutException:
            raise APITimeoutError("Request timed out.") from None
        except httpx.HTTPError as e:  # refused, reset, DNS, a broken protocol
            raise APIConnectionError(f"Connection error. ({type(e).__name__}: {e})"[:300]) from None
        finally:
            if slot is not None:
                free.append(slot)
        if not 200 <= response.status_code < 300:
            raise _status_error(response)
        return response

    async def _trace(self, event: str, info: dict) -> None:
        if event == "http11.send_request_body.complete" and self.on_sent is not None:
            self.on_sent()

    async def complete(self, messages: list[dict[str, str]], _probing: bool = False,
                       extra: dict[str, Any] | None = None) -> JudgeReply:
        """One chat completion, retried as configured.

        ``extra``: further request parameters (a metric file's, ``Template.request_params``); with
        ``top_logprobs`` the reply's text is an envelope holding its tokens' probabilities
        (:func:`evaluators.core.logprobs.envelope`).

        Raises:
            JudgeError: the last failure, once retries are spent or when it cannot be retried;
                a reply that cannot be read (not JSON, no choices) too, with its reason.
        """
        cfg = self.config
        body = json.dumps(chat_request(cfg, messages, extra), ensure_ascii=False).encode()
        limiter = self.limiter
        tokens = sum(len(str(m.get("content", ""))) for m in messages) / 4 + 120  # for a tpm budget
        attempt = 0
        while True:
            attempt += 1
            if limiter is not None:
                sent_at = await limiter.acquire(tokens)
            start = time.perf_counter()
            try:
                try:
                    response = await self._post(body)
                except asyncio.CancelledError:
                    if limiter is not None:
                        limiter.release(None, sent_at=sent_at)
                    raise
                except APIError as exc:
                    if limiter is not None:
                        status = exc.status_code
                        hinted = _retry_after(exc)
                        if hinted is None and status == 429:
                            hinted = self._delay(attempt - 1, exc)
                        limiter.release(status, getattr(exc.response, "headers", None), hinted, sent_at)
                    raise
                if limiter is not None:
                    limiter.release(response.status_code, response.headers, sent_at=sent_at)
                latency = (time.perf_counter() - start) * 1000
                try:
                    data = json.loads(response.content)
                    text, pt, ct, finish, cached = read_completion(data)
                    if text and extra and "top_logprobs" in extra:
                        from evaluators.core.logprobs import envelope

                        text = envelope(text, (data["choices"][0].get("logprobs") or {}).get("content"))
                except (ValueError, TypeError, AttributeError, KeyError, IndexError) as e:
                    raise JudgeError(f"unreadable reply from the judge: {_describe(e, self._secrets)}", attempt,
                                     answered=True) from None
            except asyncio.CancelledError:
                raise
            except APIError as exc:
                if attempt <= cfg.max_retries and self._retryable(exc, _probing, attempt):
                    if limiter is None or exc.status_code != 429:
                        await asyncio.sleep(self._delay(attempt - 1, exc))
                    # a 429 under a limiter: it pauses every call until Retry-After, this one included
                    continue
                raise JudgeError(_describe(exc, self._secrets), attempt, exc.status_code, False) from None
            if not text:
                raise JudgeError("the judge returned an empty reply", attempt, 200, answered=True)
            return JudgeReply(text, pt, ct, latency, attempt, finish, cached)

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
            no_v1 = self.config.provider == "compatible" and not urlsplit(self.url).path.rstrip("/").endswith("/v1")
            if no_v1 and e.status in (404, 405):  # /chat/completions asked at the server's root, not under /v1
                what = (f"{where} answered HTTP {e.status} at /chat/completions: is the base URL missing /v1? "
                        "(OpenAI-compatible servers answer under it, e.g. http://localhost:11434/v1)")
            elif e.status in (401, 403):
                what = f"{where} refused the key (HTTP {e.status}): is the API key right, and for this server?"
            elif e.status == 404:
                what = f"{where} answered 404: the model does not exist there, or the URL is wrong: is the " \
                       "model's name right, as the server lists it?"
            elif e.status is None:
                what = f"cannot reach {where}: {e}. Is the server running, at this address and port?"
            else:
                what = f"{where} failed its check: {e}"
            raise JudgeUnavailable(f"judge check failed: {what}", e.attempts) from None

    async def aclose(self) -> None:
        for client in self._shards:
            await client.aclose()


class _StdlibResponse:
    """What :meth:`JudgeClient.complete` reads of a response (status, headers, body), from ``http.client``."""

    def __init__(self, status_code: int, headers: Any, content: bytes):
        self.status_code, self.headers, self.content = status_code, headers, content


class PlainHTTPCheck(JudgeClient):
    """The judge's check over the standard library's ``http.client``, for a judge reached over plain HTTP
    with no proxy in the environment (a local or in-cluster server): the check leaves without waiting for
    ``httpx2``'s import and client set-up (~0.1 s of a run's start). Same request (URL, headers, body),
    retries, limiter and errors as :class:`JudgeClient`, whose :meth:`complete` and :meth:`probe` it runs;
    one connection, one call at a time (the check is one call).
    """

    def __init__(self, config: JudgeConfig, api_key: str | None = None, limiter: Any = None):
        self._headers = self._setup(config, api_key, limiter)
        self._conn: Any = None

    @staticmethod
    def usable(endpoint: str) -> bool:
        """Plain HTTP, and no proxy httpx would have gone through (HTTP_PROXY, ALL_PROXY)."""
        proxies = ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
        return endpoint.startswith("http://") and not any(os.environ.get(k) for k in proxies)

    async def _post(self, body: bytes) -> Any:
        import http.client
        from urllib.parse import urlencode, urlsplit

        url = urlsplit(self._endpoint)
        target = (url.path or "/") + (f"?{url.query}" if url.query else "")
        if self._params:
            target += ("&" if url.query else "?") + urlencode(self._params)
        try:
            if self._conn is None:
                self._conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=self.config.timeout)
            self._conn.request("POST", target, body=body, headers=self._headers)
            if self.on_sent is not None:
                self.on_sent()
            response = self._conn.getresponse()
            reply = _StdlibResponse(response.status, response.headers, response.read())
            if response.will_close:
                self._conn.close()
                self._conn = None
        except TimeoutError:
            self._close()
            raise APITimeoutError("Request timed out.") from None
        except (OSError, http.client.HTTPException) as e:  # refused, reset, DNS, a broken protocol
            self._close()
            raise APIConnectionError(f"Connection error. ({type(e).__name__}: {e})"[:300]) from None
        if not 200 <= reply.status_code < 300:
            raise _status_error(reply)
        return reply

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def aclose(self) -> None:
        self._close()


class EarlyProbe:
    """The judge's check call, sent from a thread of its own as soon as the judge is known (the CLI
    starts it before the dataset is stored), so the first call leaves within moments of start-up.

    A :class:`Runner` given one waits for its verdict (woken the moment it comes) before its first real
    call, instead of sending its own check; its failure stops the run before any row is judged. What the
    check met of the judge's rate limits (a 429, its headers) and how long it took are handed to the
    run's limiter.

    Args:
        config: the judge, as the run will call it.
        api_key: its key for this process (never stored).
    """

    def __init__(self, config: JudgeConfig, api_key: str | None = None):
        self.config, self.api_key = config, api_key
        self.calls = 0
        self.error: BaseException | None = None
        self.latency: float | None = None  # seconds the check took, once it passed
        self.limiter: Any = None  # its own ratelimit.RateLimiter: what the check learnt of the judge's limits
        self._done = threading.Event()
        self._wake: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []  # runners awaiting result()
        self._lock = threading.Lock()
        self._sending = threading.Event()
        threading.Thread(target=self._run, name="judge-probe", daemon=True).start()

    def wait_sending(self, timeout: float = 0.5) -> None:
        """Block until the check was sent (at most ``timeout`` s): a caller doing heavy work next
        (imports, storing a dataset) would otherwise share the interpreter with it and delay it."""
        self._sending.wait(timeout)

    def _run(self) -> None:
        async def check() -> None:
            from evaluators.judge.ratelimit import RateLimiter

            # one connection is all a single call needs (the run's client opens its own pool)
            self.limiter = RateLimiter(1)
            config = replace(self.config, concurrency=1)
            client: JudgeClient = PlainHTTPCheck(config, self.api_key, limiter=self.limiter)
            if not PlainHTTPCheck.usable(client._endpoint):  # TLS or a proxy: the run's own HTTP client
                client = JudgeClient(config, self.api_key, limiter=self.limiter)
            client.on_sent = self._sending.set  # the caller goes on once the check is on the wire
            try:
                start = time.perf_counter()
                try:
                    self.calls = await client.probe()
                    self.latency = time.perf_counter() - start
                except JudgeUnavailable as e:
                    self.calls, self.error = e.attempts, e
                except Exception as e:  # noqa: BLE001 — handed to the runner, which fails the run with it
                    self.error = e
                self._announce()  # the verdict goes out now; closing the connection can follow
            finally:
                await client.aclose()

        try:
            asyncio.run(check())
        except BaseException as e:  # noqa: BLE001 — handed to the runner, which fails the run with it
            if not self._done.is_set():
                self.error = e
        finally:
            self._announce()

    def _announce(self) -> None:
        """The check is over (passed, or failed with ``error``): wake whoever waits for it, once."""
        self._sending.set()
        with self._lock:
            if self._done.is_set():
                return
            self._done.set()
            for loop, event in self._wake:
                try:
                    loop.call_soon_threadsafe(event.set)  # the runner's calls leave the moment it passed
                except RuntimeError:  # that loop has closed: nobody waits there any more
                    pass

    async def result(self) -> int:
        """The calls the check made, once it is over (woken by the check's thread the moment it is).

        Raises:
            JudgeUnavailable: the judge failed its check.
        """
        event = asyncio.Event()
        with self._lock:
            if not self._done.is_set():
                self._wake.append((asyncio.get_running_loop(), event))
            else:
                event.set()
        await event.wait()  # (a cancel is never stuck behind it)
        if self.error is not None:
            raise self.error
        return self.calls


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


def _describe(exc: Exception, secrets: tuple = ()) -> str:
    """A failed call in one line, without the keys in ``secrets`` nor anything shaped like a key
    (:func:`evaluators.core.redact.redact`: taken out before the line is cut, so no half key is left)."""
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    msg = redact(str(exc).splitlines()[0], secrets)[:300] if str(exc) else name
    return f"{name} (HTTP {status}): {msg}" if status else f"{name}: {msg}"
