"""A real OpenAI-compatible HTTP server on loopback that scripts judge replies, latency and faults.

Used by the tests and the bench (one implementation). It answers
``POST /v1/chat/completions`` (and Azure's ``/openai/deployments/<d>/chat/completions``).
By default the reply is a valid verdict whose score is derived from the prompt, so
a test can compute the expected score itself; queued or per-prompt actions inject
429s with ``Retry-After``, 500s, hangs and malformed replies.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


@dataclass
class Action:
    """What to do with one call instead of the normal reply.

    status: HTTP status to return (with an OpenAI-style error body) when not 200.
    headers: extra response headers (e.g. {"Retry-After": "0.2"}).
    content: reply text for a 200 (malformed verdicts etc.).
    hang: seconds to sleep before answering (longer than the client's timeout = a hang).
    raw_body: bytes to send as the body verbatim (broken JSON).
    """

    status: int = 200
    headers: dict = field(default_factory=dict)
    content: str | None = None
    hang: float = 0.0
    raw_body: bytes | None = None


def expected_score(prompt: str, low: int = 1, high: int = 5) -> int:
    """The score the default responder gives a prompt (tests compute expectations with it)."""
    h = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
    return low + h % (high - low + 1)


def default_responder(prompt: str, request: dict) -> str:
    score = expected_score(prompt)
    return json.dumps({"reason": f"scripted verdict {score}", "score": score})


def prompt_text(request: dict) -> str:
    return "\n".join(m.get("content", "") for m in request.get("messages", []))


class JudgeServer:
    """Context manager: ``with JudgeServer() as s: s.url``."""

    def __init__(self, responder: Callable[[str, dict], str] = default_responder, latency: float = 0.0):
        self.responder = responder
        self.latency = latency
        self.calls: list[dict] = []  # every request, in arrival order
        self.queue: deque[Action] = deque()  # applied to the next calls, whatever the prompt
        self.by_prompt: dict[str, deque[Action]] = {}  # substring -> actions for calls whose prompt has it
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def on_prompt(self, substring: str, *actions: Action) -> None:
        self.by_prompt.setdefault(substring, deque()).extend(actions)

    def prompts(self) -> list[str]:
        with self._lock:
            return [prompt_text(c) for c in self.calls]

    def _next_action(self, prompt: str) -> Action | None:
        with self._lock:
            for sub, actions in self.by_prompt.items():
                if sub in prompt and actions:
                    return actions.popleft()
            return self.queue.popleft() if self.queue else None

    def __enter__(self) -> "JudgeServer":
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out as two writes; with Nagle on, the client's delayed ACK
            # adds ~40 ms to every call, which would swamp the latency a test scripts
            disable_nagle_algorithm = True

            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, status: int, body: bytes, headers: dict | None = None):
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

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                try:
                    req = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    return self._send(400, b'{"error": {"message": "bad json"}}')
                path = self.path.split("?", 1)[0]
                req["_path"] = self.path  # tests check where the client sent the call
                req["_auth"] = self.headers.get("Authorization")  # ...and with which key
                if not path.endswith("/chat/completions"):
                    return self._send(404, b'{"error": {"message": "not found"}}')
                with owner._lock:
                    owner.calls.append(req)
                prompt = prompt_text(req)
                action = owner._next_action(prompt)
                if owner.latency:
                    time.sleep(owner.latency)
                if action and action.hang:
                    time.sleep(action.hang)
                if action and action.raw_body is not None:
                    return self._send(action.status, action.raw_body, action.headers)
                if action and action.status != 200:
                    err = {"error": {"message": f"scripted {action.status}", "type": "scripted", "code": action.status}}
                    return self._send(action.status, json.dumps(err).encode(), action.headers)
                content = action.content if action and action.content is not None else owner.responder(prompt, req)
                body = {
                    "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                    "model": req.get("model", "test-judge"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(content) // 4,
                              "total_tokens": len(prompt) // 4 + len(content) // 4},
                }
                self._send(200, json.dumps(body).encode(), action.headers if action else None)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


if __name__ == "__main__":  # `python tests/judge_server.py [latency]`: a judge to point the dashboard at by hand
    import sys

    with JudgeServer(latency=float(sys.argv[1]) if len(sys.argv) > 1 else 0.0) as s:
        print(s.url, flush=True)
        threading.Event().wait()
