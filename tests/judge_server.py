"""A real OpenAI-compatible HTTP server on loopback that scripts judge replies, latency and faults.

Used by the tests and the bench (one implementation). It answers
``POST /v1/chat/completions`` (and Azure's ``/openai/deployments/<d>/chat/completions``).
By default the reply is a valid verdict whose score is derived from the prompt, so
a test can compute the expected score itself; queued or per-prompt actions inject
429s with ``Retry-After``, 500s, hangs and malformed replies, and :class:`Faults`
injects them at random rates (decided by a hash of the prompt, so the same call meets
the same fault whatever the concurrency). ``require_key`` answers 401 to any other key,
``models`` 404 to any other model, ``rate_limit`` is a token bucket answering 429.
The runner's one-call judge check is recorded in ``probes``, the judging calls in ``calls``.
:meth:`JudgeServer.hold_calls` holds the judging calls past the first few until :meth:`JudgeServer.release`:
a test that needs a run to be in flight (to cancel it, kill it, or find it busy) holds it there instead
of hoping a scripted latency outlasts what it does meanwhile.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

if __package__ in (None, ""):  # run as a script (bench, by hand): make the project importable
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluators.judge.config import PROBE_PROMPT

HOLD_MAX = 300.0  # seconds a held call waits for release at most (a test that forgot to release ends anyway)


@dataclass
class Action:
    """What to do with one call instead of the normal reply.

    status: HTTP status to return (with an OpenAI-style error body) when not 200.
    headers: extra response headers (e.g. {"Retry-After": "0.2"}).
    content: reply text for a 200 (malformed verdicts etc.).
    hang: seconds to sleep before answering (longer than the client's timeout = a hang).
    raw_body: bytes to send as the body verbatim (broken JSON).
    finish_reason: the choice's finish_reason in a 200 reply.
    """

    status: int = 200
    headers: dict = field(default_factory=dict)
    content: str | None = None
    hang: float = 0.0
    raw_body: bytes | None = None
    finish_reason: str = "stop"  # why the model stopped, as a 200 reply says it ("length": cut at max_tokens)


@dataclass
class Faults:
    """Random faults, as shares of calls (0-1). Which call meets which fault is decided by a hash of
    (seed, prompt, how many times this prompt was asked), so it does not depend on arrival order.

    rate_429_retry_after / rate_429: 429 with / without a Retry-After header.
    rate_500: 500.
    rate_hang: sleep ``hang`` seconds before answering (longer than the client's timeout: a hang).
    rate_malformed: half a 200 whose body is not JSON, half a verdict without a usable score.
    rate_poison: a third each: ``"score": Infinity``, ``"score": 1e999``, a 429 whose Retry-After
        is neither a number nor a date.
    """

    rate_429_retry_after: float = 0.0
    rate_429: float = 0.0
    rate_500: float = 0.0
    rate_hang: float = 0.0
    rate_malformed: float = 0.0
    rate_poison: float = 0.0
    hang: float = 1.0
    retry_after: str = "0.01"
    seed: int = 0

    def pick(self, prompt: str, nth: int) -> tuple[str, "Action | None"]:
        u = int(hashlib.sha256(f"{self.seed}|{nth}|{prompt}".encode()).hexdigest()[:12], 16) / 16 ** 12
        bands = [("429_retry_after", self.rate_429_retry_after), ("429", self.rate_429), ("500", self.rate_500),
                 ("hang", self.rate_hang), ("malformed", self.rate_malformed), ("poison", self.rate_poison)]
        edge = 0.0
        for kind, rate in bands:
            if u < edge + rate:
                return kind, self._action(kind, (u - edge) / rate)
            edge += rate
        return "none", None

    def _action(self, kind: str, v: float) -> "Action":
        if kind == "429_retry_after":
            return Action(status=429, headers={"Retry-After": self.retry_after})
        if kind == "429":
            return Action(status=429)
        if kind == "500":
            return Action(status=500)
        if kind == "hang":
            return Action(hang=self.hang)
        if kind == "malformed":
            return Action(raw_body=b'{"choices": [{"message": ') if v < 0.5 else Action(content="Solid answer, 4/5.")
        if v < 1 / 3:
            return Action(content='{"reason": "poison", "score": Infinity}')
        if v < 2 / 3:
            return Action(content='{"reason": "poison", "score": 1e999}')
        return Action(status=429, headers={"Retry-After": "soon-ish, maybe"})


def expected_score(prompt: str, low: int = 1, high: int = 5) -> int:
    """The score the default responder gives a prompt (tests compute expectations with it)."""
    h = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
    return low + h % (high - low + 1)


def default_responder(prompt: str, request: dict) -> str:
    score = expected_score(prompt)
    return json.dumps({"reason": f"scripted verdict {score}", "score": score})


def prompt_text(request: dict) -> str:
    return "\n".join(m.get("content", "") for m in request.get("messages", []))


class _Handler(BaseHTTPRequestHandler):
    """One request to a :class:`JudgeServer`: ``owner``, set on the subclass each server makes."""

    owner: "JudgeServer"
    protocol_version = "HTTP/1.1"
    # headers and body go out as two writes; with Nagle on, the client's delayed ACK
    # adds ~40 ms to every call, which would swamp the latency a test scripts
    disable_nagle_algorithm = True

    def log_message(self, *args):  # keep test output clean
        pass

    def _send(self, status: int, body: bytes, headers: dict | None = None):
        self._landed()  # (before the reply leaves: the client cannot send its next call while this one counts)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): expected for hangs

    def do_GET(self):  # /_stats: what a server in another process saw (for tests and benches)
        if self.owner.batch_api.handles(self.path):  # the Batch API (tests/batch_server.py)
            return self.owner.batch_api.get(self)
        if self.path != "/_stats":
            return self._send(404, b'{"error": {"message": "not found"}}')
        o = self.owner
        with o._lock:
            stats = {"calls": len(o.calls), "probes": len(o.probes), "served": dict(o.served),
                     # wall-clock time the first request (probe or call) arrived, for start-up benches
                     "first_at": o.requests[0]["_at"] if o.requests else None,
                     # every request's arrival (wall clock) and whether it was the check, in order
                     "arrivals": [(r["_at"], r in o.probes) for r in o.requests],
                     "held": o.held, "max_held": o.max_held, "max_in_flight": o.max_in_flight}
        self._send(200, json.dumps(stats).encode())

    def _landed(self) -> None:
        """This request is no longer a judging call in flight (answered, or failed to be)."""
        if getattr(self, "_in_flight", False):
            self._in_flight = False
            with self.owner._lock:
                self.owner.in_flight -= 1

    def do_POST(self):
        self._in_flight = False  # (one handler serves every request of a kept-alive connection)
        length = int(self.headers.get("Content-Length", 0))
        if self.path == "/_faults":  # switch a server in another process's faults (JSON or null)
            spec = json.loads(self.rfile.read(length) or b"null")
            self.owner.faults = Faults(**spec) if spec else None
            return self._send(200, b"{}")
        if self.path == "/_hold":  # hold_calls (JSON: its arguments) or, with null, release
            spec = json.loads(self.rfile.read(length) or b"null")
            if spec:
                self.owner.hold_calls(**spec)
            else:
                self.owner.release()
            return self._send(200, b"{}")
        body = self.rfile.read(length)
        if not body or len(body) < length:  # the client went away mid-request (a cancel): no call
            return self._send(400, b'{"error": {"message": "incomplete request"}}')
        if self.owner.batch_api.handles(self.path):
            return self.owner.batch_api.post(self, self.path, body)
        try:
            req = json.loads(body)
        except ValueError:
            return self._send(400, b'{"error": {"message": "bad json"}}')
        path = self.path.split("?", 1)[0]
        req["_path"] = self.path  # tests check where the client sent the call
        req["_auth"] = self.headers.get("Authorization")  # ...and with which key
        req["_headers"] = dict(self.headers)  # (Azure sends its key as api-key)
        req["_at"] = time.time()  # when it arrived
        req["_t"] = time.monotonic()  # (the same, on a clock no adjustment moves: for gaps between calls)
        if not path.endswith("/chat/completions"):
            return self._send(404, b'{"error": {"message": "not found"}}')
        prompt = prompt_text(req)
        with self.owner._lock:
            nth = None if PROBE_PROMPT in prompt else len(self.owner.calls)  # (counting from 0)
            (self.owner.probes if nth is None else self.owner.calls).append(req)
            self.owner.requests.append(req)
            if nth is not None:
                self._in_flight = True
                self.owner.in_flight += 1
                self.owner.max_in_flight = max(self.owner.max_in_flight, self.owner.in_flight)
        try:
            self._answer(req, prompt, nth)
        finally:
            self._landed()

    def _answer(self, req: dict, prompt: str, nth: int | None):
        """The reply to a call (``nth``, None for the check) as scripted: refused, held, faulted, late."""
        refusal = self.owner._refusal(req, self.headers)
        if refusal:
            status, err, headers = refusal
            return self._send(status, json.dumps({"error": err}).encode(), headers)
        self.owner._hold(nth)
        action = self.owner._next_action(prompt)
        if self.owner.latency:
            time.sleep(self.owner.latency)
        if action and action.hang:
            time.sleep(action.hang)
        if action and action.raw_body is not None:
            return self._send(action.status, action.raw_body, action.headers)
        if action and action.status != 200:
            err = {"error": {"message": f"scripted {action.status}", "type": "scripted", "code": action.status}}
            return self._send(action.status, json.dumps(err).encode(), action.headers)
        if action and action.content is not None:
            content = action.content
        elif PROBE_PROMPT in prompt:  # the judge check asks for a word, not a verdict
            content = "OK"
        else:
            content = self.owner.responder(prompt, req)
        body = {
            "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
            "model": req.get("model", "test-judge"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": action.finish_reason if action else "stop",
                         **self.owner._logprobs(req, content)}],
            "usage": self.owner.usage(prompt, content),
        }
        self._send(200, json.dumps(body).encode(), action.headers if action else None)


class _Server(ThreadingHTTPServer):
    request_queue_size = 512  # like a real server: concurrent clients are queued, not refused


class JudgeServer:
    """Context manager: ``with JudgeServer() as s: s.url``."""

    def __init__(self, responder: Callable[[str, dict], str] = default_responder, latency: float = 0.0,
                 faults: Faults | None = None, require_key: str | None = None, models: set[str] | None = None,
                 rate_limit: tuple[float, float] | None = None):
        self.responder = responder
        self.latency = latency
        self.faults = faults
        self.require_key = require_key  # any other key (or none) gets 401
        self.models = models  # any other model gets 404
        self.rate_limit = rate_limit  # (calls per second, burst): a token bucket; when empty, 429 + Retry-After
        self.calls: list[dict] = []  # every judging request, in arrival order
        self.probes: list[dict] = []  # the runner's judge checks (PROBE_PROMPT), kept apart
        self.requests: list[dict] = []  # both, in arrival order
        self.served: Counter = Counter()  # fault kind -> times served
        self.queue: deque[Action] = deque()  # applied to the next calls, whatever the prompt
        self.by_prompt: dict[str, deque[Action]] = {}  # substring -> actions for calls whose prompt has it
        self._seen: Counter = Counter()  # prompt -> times asked (for Faults)
        self._bucket = (0.0, 0.0)  # tokens, last refill time
        self._lock = threading.Lock()
        self._released = threading.Event()  # cleared by hold_calls: the judging calls past hold_after wait for it
        self._released.set()
        self.hold_after = 0
        self.hold_until: int | None = None  # the gate opens by itself once this many calls wait at it
        self.hold_max = HOLD_MAX
        self.held = 0  # judging calls waiting at the gate now
        self.max_held = 0  # ...and the most that waited at once
        self.in_flight = 0  # judging calls arrived and not yet answered (their reply not yet on its way)
        self.max_in_flight = 0  # ...and the most at once: the concurrency the judge saw
        self._server: ThreadingHTTPServer | None = None
        # reply text -> the tokens' logprobs, for requests with "logprobs": true (None: the reply has none)
        self.top_logprobs_for: Callable[[str], list] | None = None
        # (block, minimum) in tokens: report prompt_tokens_details.cached_tokens as a provider's prefix cache
        # would (the longest prefix shared with an earlier prompt, in whole blocks, for prompts of at least
        # ``minimum`` tokens): OpenAI's rule is (128, 1024). Blocks are cut at 4 characters a token.
        self.prefix_cache: tuple[int, int] | None = None
        self.token_count: Callable[[str], int] = lambda text: len(text) // 4  # (a bench may set a tokenizer)
        self._prefixes: set[int] = set()
        from tests.batch_server import BatchAPI

        self.batch_api = BatchAPI(self)  # /v1/files and /v1/batches
        self.usages: list[dict] = []  # the usage each judging call reported (not the check's): tests price them

    def usage(self, prompt: str, content: str) -> dict:
        """The usage a reply reports: ``token_count`` of the prompt and the reply (4 characters a token unless
        set), and the prefix cache's hits when it has one."""
        count = self.token_count
        usage = {"prompt_tokens": count(prompt), "completion_tokens": count(content)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if self.prefix_cache is not None:
            block, minimum = self.prefix_cache
            step = block * 4
            with self._lock:
                hits = [k for k in range(step, len(prompt) + 1, step) if hash(prompt[:k]) in self._prefixes]
                self._prefixes.update(hash(prompt[:k]) for k in range(step, len(prompt) + 1, step))
            cached = count(prompt[:max(hits, default=0)]) if usage["prompt_tokens"] >= minimum else 0
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        if PROBE_PROMPT not in prompt:
            with self._lock:
                self.usages.append(usage)
        return usage

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _logprobs(self, req: dict, content: str) -> dict:
        """A choice's ``logprobs`` for a request asking for them: ``top_logprobs_for(content)`` -> the
        ``content`` list of ``{token, logprob, top_logprobs}`` (as OpenAI sends it), when a test set it."""
        if not req.get("logprobs") or self.top_logprobs_for is None:
            return {}
        return {"logprobs": {"content": self.top_logprobs_for(content)}}

    def on_prompt(self, substring: str, *actions: Action) -> None:
        self.by_prompt.setdefault(substring, deque()).extend(actions)

    def hold_calls(self, after: int = 0, until: int | None = None, at_most: float = HOLD_MAX) -> None:
        """Answer the first ``after`` judging calls (counting every call so far) as usual; hold the later ones
        (the judge check is never held) until :meth:`release`, until ``until`` of them wait at once (a
        barrier: ``max_held`` then says it filled), until one has waited ``at_most`` seconds, or until the
        server closes. Each opens the gate for good (until the next ``hold_calls``)."""
        with self._lock:
            self.hold_after, self.hold_until, self.hold_max = after, until, at_most
            self._released.clear()

    def release(self) -> None:
        """Let the held calls (and every later one) through."""
        self._released.set()

    def _hold(self, nth: int | None) -> None:
        """Wait at the gate when the ``nth`` judging call (None: the check) is past ``hold_after`` while the
        gate is closed."""
        with self._lock:
            if nth is None or self._released.is_set() or nth < self.hold_after:
                return
            self.held += 1
            self.max_held = max(self.max_held, self.held)
            if self.hold_until is not None and self.held >= self.hold_until:
                self._released.set()
        try:
            if not self._released.wait(self.hold_max):
                self._released.set()  # held at_most: the gate opens for good (a barrier that never filled)
        finally:
            with self._lock:
                self.held -= 1

    def prompts(self) -> list[str]:
        with self._lock:
            return [prompt_text(c) for c in self.calls]

    def _next_action(self, prompt: str) -> Action | None:
        with self._lock:
            for sub, actions in self.by_prompt.items():
                if sub in prompt and actions:
                    return actions.popleft()
            if self.queue:
                return self.queue.popleft()
            if self.faults is not None:
                self._seen[prompt] += 1
                kind, action = self.faults.pick(prompt, self._seen[prompt])
                self.served[kind] += 1
                return action
            return None

    def _take_token(self) -> float:
        """0 when a call may pass the rate limit, else seconds until the next token."""
        rate, burst = self.rate_limit
        with self._lock:
            tokens, last = self._bucket
            now = time.monotonic()
            tokens = min(burst, tokens + (now - last) * rate) if last else burst
            if tokens >= 1:
                self._bucket = (tokens - 1, now)
                return 0.0
            self._bucket = (tokens, now)
            self.served["rate_limited"] += 1
            return (1 - tokens) / rate

    def _refusal(self, req: dict, headers) -> tuple[int, dict, dict] | None:
        if self.require_key is not None:
            given = headers.get("api-key") or (headers.get("Authorization") or "").removeprefix("Bearer ")
            if given != self.require_key:
                return 401, {"message": "Incorrect API key provided", "type": "invalid_request_error",
                             "code": "invalid_api_key"}, {}
        if self.models is not None and req.get("model") not in self.models:
            return 404, {"message": f"The model `{req.get('model')}` does not exist", "type": "invalid_request_error",
                         "code": "model_not_found"}, {}
        if self.rate_limit is not None:
            wait = self._take_token()
            if wait:
                return 429, {"message": "rate limited", "type": "rate_limit"}, {"Retry-After": f"{wait:.3f}"}
        return None

    def __enter__(self) -> "JudgeServer":
        self._server = _Server(("127.0.0.1", 0), type("Handler", (_Handler,), {"owner": self}))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.release()  # nothing stays held past the test
        self._server.shutdown()
        self._server.server_close()


class JudgeServerProcess:
    """The same server in its own process (as a real judge is): the test's process keeps its CPU and
    GIL for the client, which is what makes thousands of calls fast. ``stats()`` reads its counters.

    Args:
        latency: seconds per call.
        faults: :class:`Faults` to inject.
        rate_limit: (calls per second, burst) as for :class:`JudgeServer`.
    """

    def __init__(self, latency: float = 0.0, faults: Faults | None = None,
                 rate_limit: tuple[float, float] | None = None):
        self.latency, self.faults, self.rate_limit = latency, faults, rate_limit
        self.url = ""

    def __enter__(self) -> "JudgeServerProcess":
        import os
        import subprocess
        import sys
        from dataclasses import asdict
        from pathlib import Path

        root = Path(__file__).resolve().parent.parent
        env = dict(os.environ, PYTHONPATH=str(root))
        faults = json.dumps(asdict(self.faults)) if self.faults else "null"
        self._proc = subprocess.Popen([sys.executable, str(Path(__file__)), str(self.latency), faults,
                                       json.dumps(self.rate_limit)],
                                      stdout=subprocess.PIPE, text=True, env=env, cwd=root)
        self.url = self._proc.stdout.readline().strip()
        if not self.url:
            raise RuntimeError("the judge server process did not start")
        return self

    def _http(self, method: str, path: str, body: bytes | None = None) -> dict:
        import urllib.request

        req = urllib.request.Request(self.url.removesuffix("/v1") + path, data=body, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def stats(self) -> dict:
        """{"calls": judging calls, "probes": judge checks, "served": fault kind -> count, "arrivals": ...,
        "held", "max_held", "max_in_flight": see :class:`JudgeServer`}."""
        return self._http("GET", "/_stats")

    def set_faults(self, faults: Faults | None) -> None:
        from dataclasses import asdict

        self._http("POST", "/_faults", json.dumps(asdict(faults) if faults else None).encode())

    def hold_calls(self, after: int = 0, until: int | None = None, at_most: float = HOLD_MAX) -> None:
        """:meth:`JudgeServer.hold_calls` in the server's process (``stats()`` has held, max_held, max_in_flight)."""
        self._http("POST", "/_hold", json.dumps({"after": after, "until": until, "at_most": at_most}).encode())

    def release(self) -> None:
        self._http("POST", "/_hold", b"null")

    def __exit__(self, *exc) -> None:
        self._proc.terminate()
        self._proc.wait(10)


if __name__ == "__main__":  # `python tests/judge_server.py [latency] [faults JSON] [[rate, burst] JSON]`
    import sys

    faults_arg = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
    rate_arg = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    with JudgeServer(latency=float(sys.argv[1]) if len(sys.argv) > 1 else 0.0,
                     faults=Faults(**faults_arg) if faults_arg else None,
                     rate_limit=tuple(rate_arg) if rate_arg else None) as s:
        print(s.url, flush=True)
        threading.Event().wait()
