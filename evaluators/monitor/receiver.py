"""The OTLP/HTTP receiver (``python -m evaluators monitor serve``): ``POST /v1/traces`` and ``POST /v1/logs`` on
Starlette, served by uvicorn.

A request goes one way through small stages, each refusing what it cannot hold, as the OTLP/HTTP specification
says a server answers:

1. the token (``Authorization: Bearer``) names the project: none, unknown or revoked -> 401, nothing read further;
2. the body: more bodies at once than ``max_inflight`` bytes -> 429 (before one byte is read; each counted at its
   ``Content-Length``, else at the limit); read up to the limit (``Content-Length`` or the bytes as they come)
   -> 413 past it;
3. ``Content-Encoding: gzip`` undone up to the same limit (a gzip bomb stops there) -> 413; a broken stream -> 400;
4. decoded (:mod:`evaluators.monitor.otlp`): unreadable -> 400 (the sender must not retry); spans it refuses
   (too many attributes, ...) are counted in the reply's ``partial_success``, the rest kept;
5. stored, committed before the reply: more writes waiting than ``max_pending`` -> 429, a store that fails or
   takes longer than ``write_timeout`` -> 503, both with ``Retry-After`` (what was sent is sent again and stored
   once: spans and records are keyed);
6. 200, with ``partial_success`` in the request's encoding.

Errors carry a ``google.rpc.Status`` (code, message) in the request's encoding. No token reaches a log.
"""
from __future__ import annotations

import asyncio
import json
import threading
import zlib
from dataclasses import dataclass
from typing import Any, Callable

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from evaluators.monitor import otlp

PROTOBUF, JSON_TYPE = "application/x-protobuf", "application/json"
# gRPC status codes the OTLP/HTTP specification puts in an error's Status message
GRPC_CODE = {400: 3, 401: 16, 413: 8, 415: 3, 429: 8, 503: 14}
DRAIN_FACTOR = 4  # a refused body is read and dropped up to this many times the limit (so the sender reads the
                  # answer instead of a reset connection); past that the connection is closed


@dataclass(frozen=True)
class Limits:
    """What one receiver holds at once."""

    max_body: int = 20 * 2**20  # bytes of a request's body, before and after gzip (the Collector's default, 20 MiB)
    max_inflight: int = 80 * 2**20  # bytes of the bodies being read and decoded at once (4 x max_body); more -> 429
    max_pending: int = 16  # store writes running or waiting; more -> 429
    write_timeout: float = 10.0  # seconds a write may take before the sender is told 503 (it will send again)
    retry_after: int = 2  # seconds, in 429 and 503 replies


class TooBig(Exception):
    pass


def status_body(code: int, message: str, content_type: str) -> bytes:
    """A ``google.rpc.Status`` (code = 1, message = 2) in the request's encoding."""
    grpc = GRPC_CODE.get(code, 2)
    if content_type == JSON_TYPE:
        return json.dumps({"code": grpc, "message": message}).encode()
    msg = message.encode()
    return b"\x08" + _varint(grpc) + b"\x12" + _varint(len(msg)) + msg


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def gunzip(body: bytes, limit: int) -> bytes:
    """The body ``Content-Encoding: gzip`` encoded, never more than ``limit`` bytes of it.

    Raises:
        TooBig: it decompresses to more than ``limit`` bytes (nothing past the limit is made).
        otlp.OtlpError: not a gzip stream, or cut short.
    """
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as e:
        raise otlp.OtlpError(f"the body is not valid gzip ({e})") from None
    if len(out) > limit or d.unconsumed_tail:
        raise TooBig(f"the body decompresses to more than {limit:,} bytes")
    if not d.eof:
        raise otlp.OtlpError("the gzip body is cut short")
    return out


class Receiver:
    """The receiver's state: the store, its limits, the writes in flight."""

    def __init__(self, store, limits: Limits = Limits()):
        self.store, self.limits = store, limits
        self._lock = threading.Lock()
        self.pending = 0  # writes running or waiting (they may outlive a 503 reply)
        self.inflight_bytes = 0  # the bodies being read or decoded: their Content-Length (else max_body) each
        self.stored = {"spans": 0, "logs": 0, "requests": 0}

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/traces", self.traces, methods=["POST"]),
                                 Route("/v1/logs", self.logs, methods=["POST"]),
                                 Route("/health", self.health, methods=["GET"])])

    async def health(self, request: Request) -> Response:
        with self._lock:
            return JSONResponse({"ok": True, "pending_writes": self.pending, "inflight_bytes": self.inflight_bytes,
                                 **self.stored})

    async def traces(self, request: Request) -> Response:
        return await self._export(request, "traces", otlp.decode_traces)

    async def logs(self, request: Request) -> Response:
        return await self._export(request, "logs", otlp.decode_logs)

    async def _export(self, request: Request, kind: str, decode: Callable) -> Response:
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        reply_type = JSON_TYPE if ctype == JSON_TYPE else PROTOBUF

        def error(code: int, message: str, retry: bool = False) -> Response:
            headers = {"Retry-After": str(self.limits.retry_after)} if retry else None
            return Response(status_body(code, message, reply_type), code, headers=headers, media_type=reply_type)

        auth = request.headers.get("authorization", "")
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        try:
            project = await asyncio.to_thread(self.store.token_project, token) if token else None
        except Exception:  # noqa: BLE001 — the store is down: nothing can be checked, nor stored
            return error(503, "the store cannot be reached; send again later", retry=True)
        if project is None:
            await self._drain(request)
            return error(401, "an ingest token is needed: Authorization: Bearer <token> (python -m evaluators "
                              "monitor token create --project NAME); this one is missing, unknown or revoked")
        length = request.headers.get("content-length", "")
        need = max(1, min(int(length), self.limits.max_body) if length.isdigit() else self.limits.max_body)
        with self._lock:  # bodies being read or decoded at once: their bytes bounded (one always goes)
            full = self.inflight_bytes > 0 and self.inflight_bytes + need > self.limits.max_inflight
            if not full:
                self.inflight_bytes += need
        if full:
            await self._drain(request)
            return error(429, "this receiver holds as many bodies as it can; send again later", retry=True)
        try:
            return await self._take(request, kind, decode, project, ctype, reply_type, error)
        finally:
            with self._lock:
                self.inflight_bytes -= need

    async def _take(self, request: Request, kind: str, decode: Callable, project: str, ctype: str, reply_type: str,
                    error: Callable) -> Response:
        """Read, undo gzip, decode, store, reply."""
        try:
            body = await self._read(request)
            encoding = request.headers.get("content-encoding", "").strip().lower()
            if encoding == "gzip":
                body = gunzip(body, self.limits.max_body)
            elif encoding not in ("", "identity"):
                return error(415, f"Content-Encoding {encoding!r} is not accepted: send gzip or none")
            items, refused = decode(body, ctype)
        except TooBig as e:
            return error(413, str(e))
        except otlp.OtlpError as e:
            return error(400, str(e))
        except ClientDisconnect:
            return error(400, "the sender went away before the body ended")
        spans, logs = (items, []) if kind == "traces" else ([], items)
        if items:
            refusal = await self._store(project, spans, logs)
            if refusal is not None:
                return error(*refusal, retry=True)
        message = "; ".join(refused[:5]) + (f"; and {len(refused) - 5} more" if len(refused) > 5 else "")
        return Response(otlp.encode_response(kind, len(refused), message, reply_type), 200, media_type=reply_type)

    async def _store(self, project: str, spans: list, logs: list) -> tuple[int, str] | None:
        """Write, committed before this returns; or why not (status, message)."""
        with self._lock:
            if self.pending >= self.limits.max_pending:
                return 429, f"{self.pending} writes are waiting for the store; send again later"
            self.pending += 1
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def write() -> None:
            try:
                self.store.receive_telemetry(project, spans, logs)
                with self._lock:
                    self.stored["spans"] += len(spans)
                    self.stored["logs"] += len(logs)
                    self.stored["requests"] += 1
                outcome: Any = None
            except Exception as e:  # noqa: BLE001 — the store refused or failed: the sender sends again
                outcome = e
            finally:
                with self._lock:
                    self.pending -= 1
            loop.call_soon_threadsafe(lambda: done.done() or done.set_result(outcome))

        threading.Thread(target=write, name="monitor-write", daemon=True).start()
        try:
            outcome = await asyncio.wait_for(asyncio.shield(done), self.limits.write_timeout)
        except asyncio.TimeoutError:
            return 503, f"the store took over {self.limits.write_timeout:g} s to write; send again later"
        if outcome is not None:
            return 503, f"the store could not write ({type(outcome).__name__}); send again later"
        return None

    async def _read(self, request: Request, keep: bool = True) -> bytes:
        """The body, read as it comes; past the limit the rest is read and dropped up to DRAIN_FACTOR x the limit
        (so the sender reads the 413 rather than a reset connection), then TooBig is raised."""
        limit = self.limits.max_body
        length = request.headers.get("content-length", "")
        over = length.isdigit() and int(length) > limit
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            over = over or size > limit
            if over or not keep:
                chunks = []
                if size > DRAIN_FACTOR * limit:
                    break
            else:
                chunks.append(chunk)
        if over:
            said = f"{int(length):,}" if length.isdigit() else f"over {limit:,}"
            raise TooBig(f"the body is {said} bytes; this receiver takes at most {limit:,}")
        return b"".join(chunks)

    async def _drain(self, request: Request) -> None:
        """Read and drop a refused body (up to DRAIN_FACTOR x the limit)."""
        try:
            await self._read(request, keep=False)
        except (TooBig, ClientDisconnect):
            pass
