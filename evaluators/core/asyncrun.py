"""Running a coroutine to its end from plain code, also where an event loop is already running (a notebook,
Streamlit): the one way the runner and the suites do it."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Coroutine


def run_to_end(coro: Coroutine[Any, Any, Any]) -> Any:
    """``asyncio.run(coro)``; inside a running loop, in a thread of its own (whose exception is re-raised here)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    th = threading.Thread(target=target)
    th.start()
    th.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
