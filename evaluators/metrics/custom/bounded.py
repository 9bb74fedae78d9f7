"""Users' Jinja2 templates (Prompty bodies) rendered under a time, an output-size and a memory bound, in a
process of their own where a runaway can be stopped: a nested ``range`` loop, ``'x' * 50000000`` or a list
multiplied to gigabytes fails its row with a sentence saying why, and the caller's process stays healthy.

Three layers, each stopping what the others cannot:

* the sandbox's own guards (:class:`BoundedEnvironment`): ``*``, ``+`` and ``**`` are intercepted and a string
  or list that would pass :data:`MAX_CHARS` is refused before it is made; the output is summed while it is
  generated and refused past :data:`MAX_CHARS`;
* the render process (:func:`serve`, this file run by path, so it imports Jinja2 and the standard library
  only, with an empty environment: no key reaches it): each render has :data:`CPU_SECONDS` of CPU time
  (``ITIMER_PROF``, so a loaded machine does not fail a sound template) and the process :data:`MEMORY_BYTES` of
  address space (``RLIMIT_AS``); it ends when its parent closes the pipe, so nothing is left spinning;
* the parent (:class:`Renderer`): a render not answered within :data:`WALL_SECONDS` kills the process (a
  new one is started for the next row). A template that ran past its time on :data:`RUNAWAY_ROWS` rows is not
  rendered again by this process: each further row fails at once saying so, so a run (or Cancel) does not
  wait a second a row.
"""
from __future__ import annotations

import json
import os
import select
import struct
import subprocess
import sys
import threading
import time
from typing import Any

MAX_CHARS = 5_000_000  # a rendered prompt (and any string or list made while rendering): ~1M tokens, past any judge
CPU_SECONDS = 1.0  # CPU time of one row's render (a sound prompt takes milliseconds)
MEMORY_BYTES = 1 << 30  # the render process's address space
WALL_SECONDS = 60.0  # the parent's backstop when the process stops answering (CPU bound missed, machine swapped;
# long enough that a loaded machine, 1 s of CPU taking 10-20 s of wall time, meets the CPU bound first)
START_SECONDS = 60.0  # a new render process has this long to say it is ready (Jinja2 imported)
RUNAWAY_ROWS = 3  # rows a template may run past its time before this process stops rendering it
_HEAD = struct.Struct("!I")
_ENDED = object()  # what the render process answers when it has ended


class RenderBoundError(ValueError):
    """A row's render stopped at a bound or failed; the message says which, in words; ``kind`` is "time",
    "memory", "size" or "template" (the template's own error, the sandbox's refusals among them)."""

    def __init__(self, message: str, kind: str = "template"):
        super().__init__(message)
        self.kind = kind


# ---------------------------------------------------------------- the sandbox (used in the render process)
def environment():
    """The bounded sandbox (also what a Prompty body is parsed with when its file is loaded)."""
    from jinja2.sandbox import SandboxedEnvironment, SecurityError

    class BoundedEnvironment(SandboxedEnvironment):
        """Jinja2's sandbox with its arithmetic on strings and lists bounded (``'x' * 50000000`` is refused
        before the 50 MB are made, as is a list grown by ``*`` or ``+``, or an integer by ``**``)."""

        intercepted_binops = frozenset({"*", "+", "**"})

        def call_binop(self, context, operator, left, right):
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple, bytes)) and isinstance(n, int) and len(seq) * n > MAX_CHARS:
                        raise SecurityError(f"the template repeats a {type(seq).__name__} of {len(seq):,} to "
                                            f"{len(seq) * n:,} items, past the {MAX_CHARS:,} a prompt may have")
            elif operator == "+":
                if (isinstance(left, (str, list, tuple, bytes)) and isinstance(right, type(left))
                        and len(left) + len(right) > MAX_CHARS):
                    raise SecurityError(f"the template joins {len(left) + len(right):,} items, past the "
                                        f"{MAX_CHARS:,} a prompt may have")
            elif operator == "**" and isinstance(left, int) and isinstance(right, int):
                if right > 0 and abs(left) > 1 and max(1, abs(left).bit_length()) * right > 64 * 1024:
                    raise SecurityError(f"the template raises {left} to the power {right}: a number too big to "
                                        "write")
            return super().call_binop(context, operator, left, right)

    return BoundedEnvironment(trim_blocks=True, keep_trailing_newline=True)


class _OverTime(BaseException):  # BaseException: no ``except Exception`` on the way swallows it
    pass


def _on_prof(signum, frame):
    raise _OverTime()


def render_bounded(env, cache: dict, body: str, values: dict[str, Any]) -> str:
    """``body`` rendered with ``values`` in the sandbox, its output bounded (compiled once per body).
    Raises RenderBoundError."""
    import signal

    signal.signal(signal.SIGPROF, _on_prof)
    signal.setitimer(signal.ITIMER_PROF, CPU_SECONDS)
    try:
        try:
            tmpl = cache.get(body)
            if tmpl is None:
                tmpl = cache[body] = env.from_string(body)
                if len(cache) > 16:
                    cache.pop(next(iter(cache)))
            parts, size = [], 0
            for chunk in tmpl.generate(**values):
                size += len(chunk)
                if size > MAX_CHARS:
                    raise RenderBoundError(f"the rendered prompt passed {MAX_CHARS:,} characters (a prompt that "
                                           "long is past any judge's context); rendering stopped there", "size")
                parts.append(chunk)
            return "".join(parts)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
    except _OverTime:
        raise RenderBoundError(f"the template ran past its {CPU_SECONDS:g} s of CPU time for one row (a loop too "
                               "long?); rendering stopped there", "time") from None
    except RenderBoundError:
        raise
    except MemoryError:
        raise RenderBoundError(f"the template needed more than the {MEMORY_BYTES >> 20:,} MiB a render may use; "
                               "rendering stopped there", "memory") from None
    except RecursionError:
        raise RenderBoundError("the template nests or recurses too deeply") from None
    except Exception as e:  # noqa: BLE001 — the template's own failure on this row, said in words
        if type(e).__name__ == "SecurityError":  # the sandbox refused: its message says what
            raise RenderBoundError(f"the template was stopped: {e}"[:2000]) from None
        raise RenderBoundError(f"the template failed on this row: {type(e).__name__}: {e}"[:2000]) from None


def _read(stream, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        got = stream.read(n - len(data))
        if not got:
            return None
        data += got
    return data


def _frame(obj: Any) -> bytes:
    data = json.dumps(obj, default=str).encode("ascii")  # (\u escapes: a lone surrogate in a row travels too)
    return _HEAD.pack(len(data)) + data


def serve() -> None:
    """The render process: requests ``{"body", "rows"}`` in, one ``{"text"}`` or ``{"error", "fatal"}`` a row
    out, until the parent closes the pipe. A row that ran out of memory ends the process after its answer."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    env = environment()
    cache: dict = {}
    out, inp = sys.stdout.buffer, sys.stdin.buffer
    out.write(_frame({"ready": True}))
    out.flush()
    while True:
        head = _read(inp, _HEAD.size)
        if head is None:
            return
        raw = _read(inp, _HEAD.unpack(head)[0])
        if raw is None:
            return
        req = json.loads(raw)
        for values in req["rows"]:
            # the kernel's backstop, should the timer's exception never be raised (a long call in C): past 3x the
            # row's CPU time the process is ended (SIGXCPU), even with no parent left to stop it
            used = resource.getrusage(resource.RUSAGE_SELF)
            resource.setrlimit(resource.RLIMIT_CPU, (int(used.ru_utime + used.ru_stime + 3 * CPU_SECONDS) + 1, hard))
            try:
                reply: dict[str, Any] = {"text": render_bounded(env, cache, req["body"], values)}
            except RenderBoundError as e:
                reply = {"error": str(e), "kind": e.kind}
            out.write(_frame(reply))
            out.flush()
            if reply.get("kind") == "memory":
                return  # a fresh process for the next row, not one whose heap a MemoryError left behind


# ---------------------------------------------------------------- the parent's side
class Renderer:
    """One render process for this process, started at the first render and again after it was stopped;
    renders from several threads take turns (a render takes milliseconds)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._runaways: dict[str, int] = {}  # template -> rows it ran past its time on
        self._buf = b""  # what the process wrote and no answer took yet
        self.rendered = 0  # rows this process's renders were asked for (tests and benches read it)

    def render(self, body: str, rows: list[dict[str, Any]]) -> list[str | RenderBoundError]:
        """Each row's rendered text, or the RenderBoundError saying why it has none."""
        with self._lock:
            self.rendered += len(rows)
            out: list[str | RenderBoundError] = []
            for row in rows:  # one at a time: a template that ran away is not sent another row
                if self._runaways.get(body, 0) >= RUNAWAY_ROWS:
                    out.append(RenderBoundError(f"not rendered: the template ran past its {CPU_SECONDS:g} s of CPU "
                                                f"time on {RUNAWAY_ROWS} rows already (a loop too long?); fix it",
                                                "time"))
                else:
                    out += self._one(body, row)
            return out

    def after_fork(self) -> None:
        """In a forked child: its own process when it renders, never its parent's pipes or a lock held then."""
        self._lock, self._proc, self._buf = threading.Lock(), None, b""

    def _one(self, body: str, row: dict[str, Any]) -> list[str | RenderBoundError]:
        """A row rendered, or why not (a process that did not answer in time is stopped)."""
        frame = _frame({"body": body, "rows": [row]})
        for attempt in (1, 2):  # a process that had ended (killed from outside) is started again, once
            proc = self._process()
            try:
                proc.stdin.write(frame)
                proc.stdin.flush()
                reply = self._reply(proc, WALL_SECONDS)
            except OSError:
                reply = _ENDED
            if reply is not _ENDED:
                break
            self._stop()
        if reply is _ENDED:  # twice: the row ends it (its CPU limit, a crash), not something from outside
            self._runaways[body] = self._runaways.get(body, 0) + 1
            return [RenderBoundError("the render process ended while rendering this row (past its CPU limit?)",
                                     "time")]
        if reply is None:
            self._stop()
            self._runaways[body] = self._runaways.get(body, 0) + 1
            return [RenderBoundError(f"the template's render did not end within {WALL_SECONDS:g} s and was stopped",
                                     "time")]
        if "text" in reply:
            return [reply["text"]]
        if reply["kind"] == "time":
            self._runaways[body] = self._runaways.get(body, 0) + 1
        if reply["kind"] == "memory":
            self._stop()  # (it ends itself after such a row)
        return [RenderBoundError(reply["error"], reply["kind"])]

    def _process(self) -> subprocess.Popen:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._stop()
        # this file by path with -I (no user site, no PYTHON* variables) and an empty environment: no key in it
        proc = subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={"LC_ALL": "C.UTF-8"},
                                close_fds=True)
        self._proc, self._buf = proc, b""
        if not isinstance(self._reply(proc, START_SECONDS), dict):
            self._stop()
            raise RenderBoundError("the render process did not start")
        return proc

    def _reply(self, proc: subprocess.Popen, seconds: float) -> Any:
        """The process's next answer, None when it gave none within ``seconds``, ``_ENDED`` when it ended."""
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + seconds
        while True:
            if len(self._buf) >= _HEAD.size:
                need = _HEAD.size + _HEAD.unpack(self._buf[:_HEAD.size])[0]
                if len(self._buf) >= need:
                    frame, self._buf = self._buf[_HEAD.size:need], self._buf[need:]
                    return json.loads(frame)
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            got = os.read(fd, 1 << 20)
            if not got:
                return _ENDED
            self._buf += got

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()
            except OSError:
                pass

    @property
    def pid(self) -> int | None:
        """The render process's id while one runs (tests watch it)."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None


_RENDERER = Renderer()
os.register_at_fork(after_in_child=_RENDERER.after_fork)


def render_rows(body: str, rows: list[dict[str, Any]]) -> list[str | RenderBoundError]:
    """Each row's ``body`` rendered under the bounds, in the render process: its text or why it has none."""
    return _RENDERER.render(body, rows)


def renderer() -> Renderer:
    return _RENDERER


if __name__ == "__main__":
    serve()
