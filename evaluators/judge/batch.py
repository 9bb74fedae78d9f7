"""The provider's Batch API: judge calls written as a JSON-lines file, uploaded (``/files``), run as a batch
(``/batches``) within 24 h at half the price, their answers read back from the batch's output and error files.

OpenAI and OpenAI-compatible servers at ``<base>/files`` and ``<base>/batches``; Azure OpenAI's global batch
at ``<endpoint>/openai/files`` and ``<endpoint>/openai/batches`` (with ``api-version``), each request naming
the deployment as its model. The requests' bodies are the direct calls' (:func:`chat_request`) and their
answers are read by the direct calls' reader (:func:`read_completion`), so a batch gives what direct calls
give. Which key and which URL follow the judge's own rules (:meth:`JudgeClient._setup`).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Iterable

from evaluators.core.redact import redact
from evaluators.judge.client import (APIConnectionError, APIError, JudgeClient, JudgeError, JudgeReply, _describe,
                                     _status_error)
from evaluators.judge.wire import chat_request, read_completion
from evaluators.judge.config import JudgeConfig

MAX_REQUESTS = 50_000  # requests in one batch, at most (OpenAI's and Azure's limit)
MAX_BYTES = 200 * 1024 * 1024  # bytes of one batch's input file, at most
DONE = ("completed", "expired", "failed", "cancelled")  # a batch in one of these states will not change again


def custom_id(row: int, metric: str, turn: int, repeat: int) -> str:
    """A request's id in a batch: the (row, metric, turn, repeat) it judges."""
    return f"{row}.{metric}.{turn}.{repeat}"


def parse_custom_id(cid: str) -> tuple[int, str, int, int]:
    row, rest = cid.split(".", 1)
    metric, turn, repeat = rest.rsplit(".", 2)
    return int(row), metric, int(turn), int(repeat)


def split_requests(lines: Iterable[bytes], max_requests: int = MAX_REQUESTS,
                   max_bytes: int = MAX_BYTES) -> list[list[bytes]]:
    """Request lines in batches of at most ``max_requests`` lines and ``max_bytes`` bytes (newlines included).

    Raises:
        ValueError: one request longer than ``max_bytes`` alone.
    """
    out: list[list[bytes]] = []
    cur: list[bytes] = []
    size = 0
    for line in lines:
        n = len(line) + 1
        if n > max_bytes:
            raise ValueError(f"one batch request is {n:,} bytes, over the {max_bytes:,}-byte limit of a batch file")
        if cur and (len(cur) >= max_requests or size + n > max_bytes):
            out.append(cur)
            cur, size = [], 0
        cur.append(line)
        size += n
    if cur:
        out.append(cur)
    return out


@dataclass
class Outcome:
    """What a batch said about one request: its reply, or why there is none (``reason``)."""

    reply: JudgeReply | None = None
    reason: str | None = None


def read_results(output: bytes, errors: bytes) -> tuple[dict[str, Outcome], list[str]]:
    """The output and error files' lines by custom id; and the lines that could not be read (named by file and
    line number, with why), whose requests stay unanswered."""
    found: dict[str, Outcome] = {}
    bad: list[str] = []
    for name, content in (("output", output), ("error", errors)):
        for n, line in enumerate(content.splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                cid = item["custom_id"]
                if not isinstance(cid, str):
                    raise TypeError("custom_id is not text")
            except (ValueError, KeyError, TypeError) as e:
                bad.append(f"{name} file line {n}: unreadable ({type(e).__name__}: {e})"[:300])
                continue
            found[cid] = _outcome(item)
    return found, bad


def _outcome(item: dict) -> Outcome:
    response, error = item.get("response") or {}, item.get("error")
    status = response.get("status_code") if isinstance(response, dict) else None
    body = response.get("body") if isinstance(response, dict) else None
    if status == 200 and isinstance(body, dict) and not error:
        try:
            text, pt, ct, finish, cached = read_completion(body)
        except (TypeError, AttributeError, KeyError, IndexError) as e:
            return Outcome(reason=f"unreadable reply from the judge: {_describe(e)}")
        if not text:
            return Outcome(reason="the judge returned an empty reply")
        return Outcome(JudgeReply(text, pt, ct, None, 1, finish, cached))  # (no latency: hours in a queue)
    msg = None
    for src in (error, (body or {}).get("error") if isinstance(body, dict) else None):
        if isinstance(src, dict):
            msg = f"{src.get('code') or src.get('type') or 'error'}: {src.get('message')}"
            break
    # cut only far past any key (the runner takes its keys out, then cuts to 500): cut at 500 here, a key
    # straddling the cut was stored in part (found by review: 31 of an Azure key's 32 characters)
    return Outcome(reason=redact(f"batch request failed (HTTP {status}): {msg or 'no reason given'}"[:4000], ()))


class BatchClient(JudgeClient):
    """The Batch API of a judge (same URL, key and request body as its direct calls). Synchronous: a run
    makes a few of these calls and waits for hours between them; it calls them from a thread.

    Args:
        config: the judge.
        api_key: a key given for it (same rules as a direct call).
    """

    def __init__(self, config: JudgeConfig, api_key: str | None = None):
        import httpx2 as httpx

        self._headers = self._setup(config, api_key, None)
        self._headers.pop("Content-Type", None)  # (set per request: JSON, or the multipart upload's)
        base = self._endpoint.removesuffix("/chat/completions")
        self.azure = config.provider == "azure"
        self.base = base.split("/deployments/", 1)[0] if self.azure else base
        self.request_url = "/chat/completions" if self.azure else "/v1/chat/completions"
        self._http = httpx.Client(headers=self._headers, timeout=httpx.Timeout(max(self.config.timeout, 60.0)))
        self._httpx = httpx

    def request_line(self, cid: str, messages: list[dict[str, str]]) -> bytes:
        """One line of a batch's input file: the direct call's body under its custom id."""
        return json.dumps({"custom_id": cid, "method": "POST", "url": self.request_url,
                           "body": chat_request(self.config, messages)}, ensure_ascii=False).encode()

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        """One Batch API call, retried on 429, 5xx and connection errors as a direct call is."""
        attempt = 0
        while True:
            attempt += 1
            try:
                try:
                    params = {**(self._params or {}), **kw.get("params", {})}
                    r = self._http.request(method, self.base + path, **{**kw, "params": params or None})
                except self._httpx.HTTPError as e:
                    raise APIConnectionError(f"Connection error. ({type(e).__name__}: {e})"[:300]) from None
                if not 200 <= r.status_code < 300:
                    raise _status_error(r)
                return r
            except APIError as exc:
                if attempt <= self.config.max_retries and self._retryable(exc, False, attempt):
                    time.sleep(self._delay(attempt - 1, exc))
                    continue
                raise JudgeError(f"Batch API {method} {path}: {_describe(exc, self._secrets)}", attempt, exc.status_code) from None

    def upload(self, lines: list[bytes], name: str) -> str:
        """The input file uploaded (purpose ``batch``); its file id."""
        r = self._call("POST", "/files", data={"purpose": "batch"},
                       files={"file": (name, b"\n".join(lines) + b"\n", "application/jsonl")})
        return r.json()["id"]

    def create(self, input_file_id: str, run_id: str) -> dict[str, Any]:
        body = {"input_file_id": input_file_id, "endpoint": self.request_url, "completion_window": "24h",
                "metadata": {"evaldash_run": run_id}}
        return self._call("POST", "/batches", json=body).json()

    def find(self, input_file_id: str) -> dict[str, Any] | None:
        """A batch already made from this input file (a run killed between asking and recording it)."""
        data = self._call("GET", "/batches", params={"limit": 100}).json()
        return next((b for b in data.get("data") or [] if b.get("input_file_id") == input_file_id), None)

    def get(self, batch_id: str) -> dict[str, Any]:
        return self._call("GET", f"/batches/{batch_id}").json()

    def content(self, file_id: str | None) -> bytes:
        return self._call("GET", f"/files/{file_id}/content").content if file_id else b""

    def close(self) -> None:
        self._http.close()
