"""Adaptive concurrency for judge calls: use what a provider allows, without drowning in 429s.

A :class:`RateLimiter` sits in front of every call attempt (:meth:`acquire` / :meth:`release`):

- calls in flight start at 16 (or the concurrency, if lower) and double each round trip (slow
  start) up to the configured concurrency; once the judge passed its check with no sign of a limit
  (no 429, no ``x-ratelimit-remaining-requests`` below the concurrency), they also open one by one,
  evenly over the second half of the check's latency (0.4-0.5 s), without waiting for answers
  (:meth:`RateLimiter.start_ramp`):
  a 429 comes back long before a verdict does, so a limited judge still stops the ramp after its first
  few calls, while an unlimited one (a 500 ms model) is not left at 16 calls for a whole round trip,
  and calls spread over the round trip instead of leaving (and coming back) in bursts;
- a 429 pauses new calls until its ``Retry-After`` (or a short backoff); while the provider's rate
  is unknown it also cuts the calls in flight to one (at most once per pause: the calls 429'd
  together would otherwise retry together), and successes raise them back (doubling up to half the
  old level, then by one a round trip);
- after a 429 the provider's bucket is empty, so the calls sent from then on that get through
  measure its refill rate (answers to calls sent before it were taken from the full bucket; each
  call's send time comes back with its outcome): calls are then paced at just under that rate,
  creeping up, faster the longer no 429 comes, until the next 429 says where the limit is (never
  below half the best rate measured, so 429s that come whatever the pace, from a flaky server,
  cannot pace a run down to nothing). A measurement is
  trusted to lower the pace only when the client was over the limit throughout it (several 429s
  in it): a lone 429 after a spell in which the client itself sent less than its pace (a busy
  machine, a slow answer or two) says only that the limit was touched, and lowers the pace by a few
  percent, never below what got through;
- ``x-ratelimit-remaining-requests`` / ``-tokens`` with ``x-ratelimit-reset-requests`` / ``-tokens``
  (OpenAI, Azure), where given, pause new calls before a 429 when what is left would be taken by the
  calls already in flight;
- optional ``rpm`` / ``tpm`` budgets are enforced with token buckets.

Nothing here imports the HTTP client; the judge client reports each attempt's status and headers.
"""
from __future__ import annotations

import asyncio
import math
import re
import time
from collections import deque
from typing import Callable, Mapping

RATE_WINDOW = 0.5  # a 429 this long after the first of a measurement starts the next one
MEASURE_WINDOW = 0.3  # seconds of calls sent after a 429 (and come back) before they measure the provider's rate
PACE_FACTOR = 0.97  # paced just under the measured rate
PACE_GROWTH = 0.02  # pacing rate grows this fraction a second just after a 429...
PACE_PROBE = 2.0  # ...and one more PACE_GROWTH a second for each PACE_PROBE seconds without one
INITIAL_WINDOW = 16  # calls in flight at first; doubled each round trip (slow start) up to the concurrency
PACE_FLOOR = 0.5  # pacing never drops below this share of the best rate measured
SATURATED = 3  # 429s in a measurement (its last included) that show the client was over the limit throughout
DEFAULT_PAUSE = 0.5  # a 429 without Retry-After pauses new calls this long (seconds)
RAMP_MIN, RAMP_MAX = 0.4, 0.5  # seconds from the check to the ramp fully open (start_ramp); it opens over the second half


class TokenBucket:
    """``rate`` tokens a second, at most ``capacity`` saved up; :meth:`wait` says how long until ``n``."""

    def __init__(self, rate: float, capacity: float, clock: Callable[[], float] = time.monotonic):
        self.rate, self.capacity, self.clock = rate, capacity, clock
        self.tokens, self.last = capacity, clock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)
        self.last = now

    def wait(self, n: float) -> float:
        self._refill()
        n = min(n, self.capacity)  # a call bigger than the bucket waits for a full bucket, never forever
        return 0.0 if self.tokens >= n else (n - self.tokens) / self.rate

    def take(self, n: float) -> None:
        self._refill()
        self.tokens -= min(n, self.capacity)


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_reset(value: str | None) -> float | None:
    """Seconds from a reset header: ``"1s"``, ``"6m0s"``, ``"20ms"``, ``"0.5"``; None when unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        v = float(value)
        return v if v >= 0 else None
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if not parts or "".join(a + u for a, u in parts) != value:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(a) * scale[u] for a, u in parts)


def _int_header(headers: Mapping[str, str], name: str) -> int | None:
    v = headers.get(name)
    try:
        return int(float(v)) if v is not None else None
    except ValueError:
        return None


class RateLimiter:
    """How many judge calls may be in flight, and when the next may leave.

    Args:
        concurrency: the most calls in flight (the configured concurrency).
        rpm: requests a minute not to exceed (None: no budget).
        tpm: tokens a minute not to exceed (None: no budget); a call counts its prompt's estimate.
        clock: monotonic seconds (tests may pass their own).
    """

    def __init__(self, concurrency: int, rpm: float | None = None, tpm: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.max = concurrency
        self.limit = float(min(concurrency, INITIAL_WINDOW))
        self._threshold = float("inf")  # below it, each success adds a call (slow start); above, 1/limit
        self.inflight = 0
        self.clock = clock
        self.paused_until = 0.0
        self.rate: float | None = None  # learned pacing (calls/s) once the provider has said 429
        self._next_send = 0.0
        self._rate_set_at = 0.0
        self._limited_at: float | None = None  # first 429 of the current measurement
        self._oks: deque[float] = deque()  # times of successes since then
        self._window_429s = 0  # 429s since then, this one included
        self._rtt: float | None = None  # a success's round trip (moving average), when calls say when they left
        self._decreased_at = -1e9
        self._best = 0.0  # the best refill rate measured
        self.rpm = TokenBucket(rpm / 60, max(1.0, rpm / 60), clock) if rpm else None
        self.tpm = TokenBucket(tpm / 60, max(1.0, tpm / 60), clock) if tpm else None
        self.calls = self.limited = 0
        self._freed = asyncio.Event()
        self._signalled = False  # a 429 or a remaining-requests header below the concurrency was seen
        self._ramp_every: float | None = None  # seconds between two calls opened by the ramp (start_ramp)
        self._ramp_at = self._ramp_from = 0.0
        self._budget = (rpm, tpm)  # the whole budget; share() gives this limiter a part of it
        # False while another process sharing this judge probes its limit for all (share): the pace holds
        self.probing = True

    def share(self, n: int, probing: bool = True) -> None:
        """This limiter is one of ``n`` (processes judging with the same judge): it keeps to ``1/n`` of the
        ``rpm`` / ``tpm`` budget, and its pace creeps up only if ``probing`` (one of them probes for all)."""
        n = max(1, n)
        for bucket, whole in ((self.rpm, self._budget[0]), (self.tpm, self._budget[1])):
            if bucket is not None:
                bucket._refill()
                bucket.rate = whole / 60 / n
                bucket.capacity = max(1.0, bucket.rate)
                bucket.tokens = min(bucket.tokens, bucket.capacity)
        self.probing = probing

    def pause_until(self, when: float) -> None:
        """Another process sharing this judge was asked to wait until ``when`` (this clock): so does this one."""
        if when > self.paused_until:
            self.paused_until = when
            self._signal()

    def start_ramp(self, check_latency: float) -> None:
        """The judge passed its check, answered in ``check_latency`` s: unless it signalled a limit,
        calls in flight open one at a time, evenly, from half ``check_latency`` (within 0.4-0.5 s) from
        now to all of it, besides growing as answers come (slow start). The first half leaves the
        first calls' 429s, if any, time to come back: a 429 or a remaining-requests header below the
        concurrency ends the ramp; the usual backoff follows."""
        if self._signalled or self.limit >= self.max:
            return
        span = min(RAMP_MAX, max(RAMP_MIN, check_latency))
        self._ramp_every = span / 2 / (self.max - self.limit)
        self._ramp_from = self.limit
        self._ramp_at = self.clock() + span / 2

    @property
    def signalled(self) -> bool:
        """The judge has said it limits this client (a 429, or a remaining-requests header below the concurrency)."""
        return self._signalled

    def adopt(self, other: "RateLimiter") -> None:
        """Take over what another limiter (the judge check's own) learnt: a pause asked for, a limit signalled."""
        self.paused_until = max(self.paused_until, other.paused_until)
        if other._signalled:
            self._signal()

    def _signal(self) -> None:
        self._signalled = True
        self._ramp_every = None

    def _ramped(self, now: float) -> None:
        """Open calls in flight as the ramp has reached by ``now``."""
        every = self._ramp_every
        if every is None:
            return
        ramp = min(self._ramp_from + max(0, int((now - self._ramp_at) / every)), float(self.max))
        if ramp > self.limit:
            self.limit = ramp
        if self.limit >= self.max:
            self._ramp_every = None  # fully open: nothing left to ramp

    # ------------------------------------------------------------ before a call
    def _wait(self, tokens: float) -> float | None:
        """0 when a call may leave now; seconds to wait; None to wait for a call to finish."""
        now = self.clock()
        if self.paused_until > now:
            return self.paused_until - now
        if self.inflight >= max(1, int(self.limit)):
            self._ramped(now)
            if self.inflight >= max(1, int(self.limit)):
                return None
        if self.rate is not None and self._next_send > now:
            return self._next_send - now
        waits = [b.wait(n) for b, n in ((self.rpm, 1), (self.tpm, tokens)) if b is not None]
        return max(waits, default=0.0)

    async def acquire(self, tokens: float = 0.0) -> float:
        """Wait until a call may leave, and count it in flight.

        Args:
            tokens: the call's estimated tokens (for a ``tpm`` budget).

        Returns:
            when it left (this limiter's clock), to give back to :meth:`release`.
        """
        while True:
            wait = self._wait(tokens)
            if wait == 0.0:
                break
            if wait is None:
                self._freed.clear()
                if self._ramp_every is None:
                    await self._freed.wait()
                    continue
                # a call finishing, or the ramp's next call, whichever comes first
                step, since = self._ramp_every, self.clock() - self._ramp_at
                left = -since + step if since < 0 else step - since % step
                try:
                    await asyncio.wait_for(self._freed.wait(), max(left, 0.001))
                except asyncio.TimeoutError:
                    pass
            else:
                await asyncio.sleep(wait)
        now = self.clock()
        self.inflight += 1
        self.calls += 1
        if self.rate is not None:
            self._grow(now)
            self._next_send = max(now, self._next_send) + 1.0 / self.rate
        for b, n in ((self.rpm, 1), (self.tpm, tokens)):
            if b is not None:
                b.take(n)
        return now

    # ------------------------------------------------------------ after a call
    def release(self, status: int | None, headers: Mapping[str, str] | None = None,
                retry_after: float | None = None, sent_at: float | None = None) -> None:
        """Report an attempt's outcome: its HTTP status (None: no answer), headers, Retry-After, and
        when it left (what :meth:`acquire` returned)."""
        self.inflight -= 1
        self._freed.set()
        now = self.clock()
        if status == 429:
            self._on_limited(now, retry_after)
        elif status is not None and status < 400:
            self._on_ok(now, sent_at)
        if headers:
            self._read_headers(now, headers)

    def _on_limited(self, now: float, retry_after: float | None) -> None:
        self.limited += 1
        self._signal()
        self.paused_until = max(self.paused_until, now + (retry_after if retry_after is not None else DEFAULT_PAUSE))
        self._window_429s += 1
        # the calls that left since then and got through, over the time they had to come back
        span = now - self._limited_at - (self._rtt or 0.0) if self._limited_at is not None else 0.0
        if span >= MEASURE_WINDOW and len(self._oks) >= 5:
            # the bucket has been empty since the first 429: what got through since is its refill rate,
            # if the client was over the limit throughout (several 429s in the window)
            measured = len(self._oks) / span
            pace = PACE_FACTOR * measured
            if self._window_429s >= SATURATED:  # the measure is the limit
                self._best = max(self._best, measured)
                self.rate = pace if self.rate is None else min(pace, self.rate * PACE_FACTOR)
            elif self.rate is not None:  # a lone 429 after a spell under the limit: the client sent less
                # than it could; what got through is at most the limit, so the pace goes down a little,
                # not below that. (With no pace yet, the window says nothing: the next one is measured.)
                self.rate = max(pace, self.rate * PACE_FACTOR)
            if self.rate is not None:
                # 429s that come whatever the pace (a flaky server, not a limit) must not pace a run down
                # to nothing: never below half the best rate measured
                self.rate = max(self.rate, PACE_FLOOR * self._best)
                self._rate_set_at = now
                self._next_send = max(self._next_send, self.paused_until)
        if self._limited_at is None or now - self._limited_at >= RATE_WINDOW:
            self._limited_at, self._oks, self._window_429s = now, deque(), 1
        if self.rate is None and now - self._decreased_at >= max(0.05, self.paused_until - now):  # once per pause
            self._threshold = max(1.0, self.limit / 2)
            # while the provider's rate is unknown, start again from one call (the calls 429'd together
            # would otherwise all retry together when the pause ends, and be 429'd together again)
            self.limit = 1.0
            self._decreased_at = now

    def _on_ok(self, now: float, sent_at: float | None = None) -> None:
        if sent_at is not None:
            took = now - sent_at
            self._rtt = took if self._rtt is None else 0.8 * self._rtt + 0.2 * took
        # a call that left before the first 429 was taken from the bucket before it ran dry
        if self._limited_at is not None and (sent_at is None or sent_at >= self._limited_at):
            self._oks.append(now)
        step = 1.0 if self.limit < self._threshold else 1.0 / max(1.0, self.limit)  # slow start, then additive
        self.limit = min(float(self.max), self.limit + step)

    def _grow(self, now: float) -> None:
        """The pace creeps up while no 429 comes, faster the longer none has come (as TCP's CUBIC
        probes): just after a 429 the limit is near, long after it the pace was set too low."""
        if self.rate is not None and not self.probing:
            self._rate_set_at = now  # another process probes; this one's pace holds
        elif self.rate is not None:
            dt = now - self._rate_set_at
            if dt > 0:
                s1 = now - (self._limited_at if self._limited_at is not None else self._rate_set_at)
                s0 = max(0.0, s1 - dt)
                self.rate *= math.exp(PACE_GROWTH * (dt + (s1 * s1 - s0 * s0) / (2 * PACE_PROBE)))
                self._rate_set_at = now

    def _read_headers(self, now: float, headers: Mapping[str, str]) -> None:
        h = {k.lower(): v for k, v in headers.items()}
        for kind in ("requests", "tokens"):
            left = _int_header(h, f"x-ratelimit-remaining-{kind}")
            reset = parse_reset(h.get(f"x-ratelimit-reset-{kind}"))
            if left is None or reset is None:
                continue
            if kind == "requests" and left < self.max:
                self._signal()  # no more ramping by time: the answers say how fast to go
            if kind == "requests" and left <= self.inflight:
                self.paused_until = max(self.paused_until, now + reset)  # the calls out will take what is left
            elif kind == "tokens" and left <= 0:
                self._signal()
                self.paused_until = max(self.paused_until, now + reset)

    # ------------------------------------------------------------ for progress
    def waiting_for(self) -> float:
        """Seconds until new calls may leave because the provider asked us to wait (0: not waiting)."""
        return max(0.0, self.paused_until - self.clock())
