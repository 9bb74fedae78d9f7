"""Failed password sign-ins, counted per client and for the whole server, with a growing wait.

A client (an IP address; every browser on this machine or behind one proxy counts as one) may get its
password wrong :data:`FREE_CLIENT` times in a row; then each further try waits 2, 4, 8... seconds after the
last failure, up to :data:`MAX_WAIT_S`. The server as a whole gets :data:`FREE_SERVER` failures in a row
(any clients), then the same growing wait for everyone: many addresses guessing together are slowed as one.
A try made while waiting is refused without its password being checked, and is not counted (hammering
neither learns anything nor keeps its own lock going). Failures older than :data:`QUIET_S` plus the wait
they earned are forgotten; a success clears its client's count (not the server's).

The clock is handed in, so tests step time instead of sleeping through it.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

FREE_CLIENT = 5  # wrong passwords in a row, per client, before waits
FREE_SERVER = 20  # ... and for the whole server
FIRST_WAIT_S = 2.0
MAX_WAIT_S = 900.0
QUIET_S = 60.0  # after the last failure (and its wait), a count starts again from nothing
SERVER = "*"  # the whole server's key
MAX_CLIENTS = 10_000  # clients remembered at once; the oldest go first


def wait_after(fails: int, free: int) -> float:
    """Seconds a key must wait after its last failure, having failed ``fails`` times in a row."""
    if fails < free:
        return 0.0
    return min(MAX_WAIT_S, FIRST_WAIT_S * 2 ** min(fails - free, 20))


class Attempts:
    """Thread-safe: every session's script thread calls it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, free_client: int = FREE_CLIENT,
                 free_server: int = FREE_SERVER) -> None:
        self._clock = clock
        self._free = {SERVER: free_server}
        self._free_client = free_client
        self._lock = threading.Lock()
        self._fails: dict[str, tuple[int, float]] = {}  # key -> (failures in a row, time of the last)

    def _left(self, key: str, now: float) -> float:
        fails, last = self._fails.get(key, (0, now))
        return max(0.0, last + wait_after(fails, self._free.get(key, self._free_client)) - now)

    def _forget_old(self, now: float) -> None:
        for key, (fails, last) in list(self._fails.items()):
            if now - last > QUIET_S + wait_after(fails, self._free.get(key, self._free_client)):
                del self._fails[key]

    def wait(self, client: str) -> float:
        """Seconds before ``client`` may try a password (0.0: now)."""
        with self._lock:
            now = self._clock()
            self._forget_old(now)
            return max(self._left(client, now), self._left(SERVER, now))

    def begin(self, client: str) -> float:
        """Start a try: the seconds ``client`` must still wait (the try refused, not counted), else 0.0 with the
        try counted as a failure already, in the same locked step, so tries started at once (many tabs, many
        sessions) cannot all pass the check before any of them is counted; :meth:`succeeded` takes it back."""
        with self._lock:
            now = self._clock()
            self._forget_old(now)
            left = max(self._left(client, now), self._left(SERVER, now))
            if left > 0:
                return left
            self._count(client, now)
            return 0.0

    def failed(self, client: str) -> None:
        """Count a wrong password from ``client`` (and for the server)."""
        with self._lock:
            now = self._clock()
            self._forget_old(now)
            self._count(client, now)

    def _count(self, client: str, now: float) -> None:
        for key in (client, SERVER):
            self._fails[key] = (self._fails.get(key, (0, now))[0] + 1, now)
        if len(self._fails) > MAX_CLIENTS:  # many addresses: drop the quietest, keep the server's count
            oldest = min((k for k in self._fails if k != SERVER), key=lambda k: self._fails[k][1])
            del self._fails[oldest]

    def succeeded(self, client: str) -> None:
        """A right password: its client's count cleared, and the server's count less the try :meth:`begin` made."""
        with self._lock:
            self._fails.pop(client, None)
            fails, last = self._fails.get(SERVER, (0, 0.0))
            if fails > 1:
                self._fails[SERVER] = (fails - 1, last)
            else:
                self._fails.pop(SERVER, None)
