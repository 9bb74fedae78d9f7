"""The OpenAI Batch API on the loopback judge server (tests/judge_server.py): ``/v1/files`` (upload, content),
``/v1/batches`` (create, get, list), and Azure's ``/openai/files`` and ``/openai/batches``.

A batch moves validating -> in_progress -> completed over the polls that read it, its requests answered as
chat completions would be (the server's responder and usage). Scripted cases: :attr:`BatchAPI.hold` keeps
batches in progress until :meth:`BatchAPI.release`; ``expire_after`` ends a batch ``expired`` with only its
first N requests done (the rest in the error file as ``batch_expired``); ``error_on`` puts requests whose
prompt has that text in the error file (HTTP 400); ``malformed_lines`` writes that many output lines broken.
"""
from __future__ import annotations

import itertools
import json
import re
import threading
import time
from email.parser import BytesParser
from email.policy import HTTP


def _prompt(body: dict) -> str:
    return "\n".join(m.get("content", "") for m in body.get("messages", []))


class BatchAPI:
    def __init__(self, owner):
        self.owner = owner
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.created: list[str] = []  # batch ids in the order they were made (a test counts submissions)
        self.requests = 0  # requests the batches answered
        self.expire_after: int | None = None
        self.error_on: str | None = None
        self.error_message = "scripted invalid request"  # what a request refused by error_on is told
        self.malformed_lines = 0
        self._ids = itertools.count(1)
        self._released = threading.Event()
        self._released.set()

    @staticmethod
    def handles(path: str) -> bool:
        p = path.split("?", 1)[0]
        return bool(re.match(r"^/(v1|openai)/(files|batches)(/|$)", p))

    def hold(self) -> None:
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    # ------------------------------------------------------------------ HTTP
    def _refused(self, handler) -> bool:
        """The server's ``require_key``, as its chat completions answer it (401)."""
        want = self.owner.require_key
        given = handler.headers.get("api-key") or (handler.headers.get("Authorization") or "").removeprefix("Bearer ")
        if want is None or given == want:
            return False
        handler._send(401, b'{"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}')
        return True

    def post(self, handler, path: str, body: bytes):
        if self._refused(handler):
            return None
        p = path.split("?", 1)[0]
        if p.endswith("/files"):
            ctype = handler.headers.get("Content-Type", "")
            msg = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {ctype}\r\n\r\n".encode() + body)
            parts = {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
                     for part in msg.iter_parts()}
            fid = f"file-{next(self._ids)}"
            self.files[fid] = parts["file"]
            return handler._send(200, json.dumps({"id": fid, "object": "file", "purpose": "batch",
                                                  "bytes": len(parts["file"])}).encode())
        if p.endswith("/batches"):
            req = json.loads(body)
            if req.get("input_file_id") not in self.files:
                return handler._send(404, b'{"error": {"message": "no such file"}}')
            bid = f"batch_{next(self._ids)}"
            lines = self.files[req["input_file_id"]].splitlines()
            now = int(time.time())
            self.batches[bid] = {"id": bid, "object": "batch", "endpoint": req.get("endpoint"), "status": "validating",
                                 "input_file_id": req["input_file_id"], "completion_window": "24h", "created_at": now,
                                 "expires_at": now + 86400, "output_file_id": None, "error_file_id": None,
                                 "request_counts": {"total": len(lines), "completed": 0, "failed": 0}}
            self.created.append(bid)
            return handler._send(200, json.dumps(self.batches[bid]).encode())
        return handler._send(404, b'{"error": {"message": "not found"}}')

    def get(self, handler):
        if self._refused(handler):
            return None
        p = handler.path.split("?", 1)[0]
        m = re.match(r"^/(?:v1|openai)/files/([^/]+)/content$", p)
        if m:
            if m.group(1) not in self.files:
                return handler._send(404, b'{"error": {"message": "no such file"}}')
            return handler._send(200, self.files[m.group(1)])
        m = re.match(r"^/(?:v1|openai)/batches/([^/]+)$", p)
        if m:
            b = self.batches.get(m.group(1))
            if b is None:
                return handler._send(404, b'{"error": {"message": "no such batch"}}')
            self._advance(b)
            return handler._send(200, json.dumps(b).encode())
        if re.match(r"^/(?:v1|openai)/batches$", p):
            return handler._send(200, json.dumps({"object": "list", "data": list(self.batches.values())}).encode())
        return handler._send(404, b'{"error": {"message": "not found"}}')

    # ------------------------------------------------------------------ a batch's life
    def _advance(self, b: dict) -> None:
        if b["status"] == "validating":
            b["status"] = "in_progress"
        elif b["status"] == "in_progress" and self._released.is_set():
            self._run(b)

    def _run(self, b: dict) -> None:
        out, err = [], []
        for n, line in enumerate(self.files[b["input_file_id"]].splitlines()):
            req = json.loads(line)
            cid, body = req["custom_id"], req["body"]
            if self.expire_after is not None and n >= self.expire_after:
                err.append({"id": f"req_{n}", "custom_id": cid, "response": None,
                            "error": {"code": "batch_expired", "message": "This request could not be executed "
                                      "before the completion window expired."}})
                continue
            prompt = _prompt(body)
            if self.error_on and self.error_on in prompt:
                err.append({"id": f"req_{n}", "custom_id": cid, "error": None, "response": {
                    "status_code": 400, "request_id": f"r{n}",
                    "body": {"error": {"message": self.error_message, "type": "invalid_request_error",
                                       "code": "invalid_value"}}}})
                continue
            content = self.owner.responder(prompt, body)
            self.requests += 1
            out.append({"id": f"req_{n}", "custom_id": cid, "error": None, "response": {
                "status_code": 200, "request_id": f"r{n}", "body": {
                    "id": "chatcmpl-batch", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model"), "usage": self.owner.usage(prompt, content),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                 "finish_reason": "stop"}]}}})
        lines = [json.dumps(x).encode() for x in out]
        for k in range(min(self.malformed_lines, len(lines))):
            lines[k] = lines[k][: len(lines[k]) // 2]  # cut in half: not JSON
        if lines:
            b["output_file_id"] = fid = f"file-{next(self._ids)}"
            self.files[fid] = b"\n".join(lines) + b"\n"
        if err:
            b["error_file_id"] = fid = f"file-{next(self._ids)}"
            self.files[fid] = b"\n".join(json.dumps(x).encode() for x in err) + b"\n"
        b["status"] = "expired" if self.expire_after is not None else "completed"
        b["request_counts"].update(completed=len(out), failed=len(err))
        self.expire_after, self.malformed_lines = None, 0  # (a scripted expiry or breakage applies to one batch)
