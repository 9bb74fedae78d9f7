"""The limiter's opening after the judge's check: calls in flight reach the concurrency within one
check latency when nothing signals a limit, and stay at slow start when something does.

The unit tests drive :class:`RateLimiter` with a clock of their own (the counts follow from it alone:
16 at once, then from half the check's latency one call each ``latency / 2 / 48`` s at concurrency 64); the end-to-end test has
the loopback judge (its own process) hold every call until the concurrency's worth wait at once, and asks it how many did."""
from __future__ import annotations

import asyncio
import json

import pytest

from evaluators.judge.ratelimit import INITIAL_WINDOW, RateLimiter


async def settled() -> None:
    """Let every task woken so far run as far as it can before the test looks (a waiter woken through
    ``asyncio.wait_for`` needs three turns of the loop): turns of the loop, counted, where a wall-clock
    pause could end first on a busy machine."""
    for _ in range(20):
        await asyncio.sleep(0)


def acquired_at(limiter: RateLimiter, now: list[float], times: list[float], calls: int = 64) -> list[int]:
    """How many of ``calls`` waiting acquires got through at each clock time in ``times`` (none released)."""

    async def go() -> list[int]:
        got = []
        tasks = [asyncio.create_task(limiter.acquire()) for _ in range(calls)]
        for t in times:
            now[0] = t
            limiter._freed.set()  # (a clock of our own: wake the waiters to look at it again)
            await settled()
            got.append(sum(task.done() for task in tasks))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return got

    return asyncio.run(go())


def test_after_a_check_with_no_sign_of_a_limit_calls_open_evenly_up_to_the_concurrency():
    """Concurrency 64, check answered in 0.5 s: 16 at once, none more for 0.25 s (time for 429s to come
    back), then one call each 0.25 / 48 s: 16 + 24 = 40 at 0.38 s, all 64 from 0.5 s on (slow start
    alone stayed at 16 until answers came back)."""
    now = [100.0]
    lim = RateLimiter(64, clock=lambda: now[0])
    lim.start_ramp(0.5)
    assert acquired_at(lim, now, [100.0, 100.2, 100.38, 100.5, 101.0]) == [INITIAL_WINDOW, 16, 40, 64, 64]


def test_without_the_ramp_slow_start_waits_for_answers():
    now = [100.0]
    lim = RateLimiter(64, clock=lambda: now[0])
    assert acquired_at(lim, now, [100.0, 100.5, 105.0]) == [16, 16, 16]


def test_a_429_stops_the_ramp():
    """The first 429 (it comes back long before a verdict would) ends the ramp: one call at a time from
    there, as the backoff says, however long the clock runs."""
    now = [100.0]
    lim = RateLimiter(64, clock=lambda: now[0])
    lim.start_ramp(0.5)

    async def go():
        tasks = [asyncio.create_task(lim.acquire()) for _ in range(64)]
        await settled()
        assert sum(t.done() for t in tasks) == 16
        lim.release(429, retry_after=0.0)  # one of the 16 comes back 429
        for t in (100.3, 100.6, 102.0):
            now[0] = t
            lim._freed.set()
            await settled()
        got = sum(t.done() for t in tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return got

    assert asyncio.run(go()) == 16  # 15 still in flight, limit cut to 1: nobody else leaves


def test_a_check_that_signalled_a_limit_starts_no_ramp():
    """Remaining requests below the concurrency on the check's reply (OpenAI and Azure send them), or a
    429 met by the check (the CLI's early check has its own limiter, adopted by the run's): no ramp."""
    now = [100.0]
    lim = RateLimiter(64, clock=lambda: now[0])
    lim.inflight = 1
    lim.release(200, {"x-ratelimit-remaining-requests": "30", "x-ratelimit-reset-requests": "1s"})  # the check
    lim.start_ramp(0.5)
    assert acquired_at(lim, now, [100.0, 101.0]) == [17, 17]  # 16 + 1 for the check's success, no more

    now[0] = 100.0
    check = RateLimiter(1, clock=lambda: now[0])
    check.inflight = 1
    check.release(429, retry_after=0.2)
    lim = RateLimiter(64, clock=lambda: now[0])
    lim.adopt(check)
    assert lim.waiting_for() == pytest.approx(0.2)  # its pause holds for the run's calls too
    lim.start_ramp(0.5)
    assert acquired_at(lim, now, [100.3, 101.0]) == [16, 16]


def test_a_run_has_its_concurrency_in_flight_before_any_call_is_answered(tmp_path, new_store_url):
    """End to end: 160 rows at concurrency 64 against a judge answering in 500 ms, which holds every row call
    until 64 of them wait at once. The ramp after the check gets there with no answer back (slow start alone
    sent 16 and waited for answers, which never came: the judge would have stopped holding at 20 s with 16);
    never more than 64 are in flight. When they leave (within the check's latency) is the unit tests' above,
    on a clock of their own (counting arrivals in the first 500 ms, as this test did, a busy machine can fail)."""
    from evaluators import prepare_run
    from evaluators.judge.config import JudgeConfig
    from evaluators.run.runner import Runner
    from evaluators.store.store import Store
    from tests.judge_server import JudgeServerProcess

    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"query": f"Question {i}?", "response": f"Answer {i}."}) + "\n"
                            for i in range(160)))
    with JudgeServerProcess(latency=0.5) as server:
        server.hold_calls(until=64, at_most=20)  # (well within the client's 60 s timeout)
        store = Store(new_store_url("r"))
        cfg = JudgeConfig(model="m", provider="compatible", base_url=server.url, concurrency=64)
        rid = prepare_run(store, str(path), ["fluency"], judge=cfg)
        assert Runner(store, rid).run() == "completed"
        stats = server.stats()
    seen = {k: stats[k] for k in ("calls", "probes", "max_held", "max_in_flight")}
    assert seen == {"calls": 160, "probes": 1, "max_held": 64, "max_in_flight": 64}


# ---------------------------------------------------------------------------- pacing after 429s
def test_the_pace_is_measured_from_calls_sent_after_the_first_429():
    """A provider allowing 40 calls/s, 50 ms a call. The first 429 comes back at t = 100 while 20 calls
    the provider took before its bucket ran dry are still out: their answers come in the next 50 ms and
    say nothing of its refill rate. From t = 100 one call leaves each 25 ms (40/s) and gets through;
    two more 429s show the client is over the limit. At t = 100.4 a 429 closes the measurement: the
    calls sent from t = 100 and back by then (sent at 100.025 ... 100.35: 14) over the 0.35 s they had
    (0.4 s less one 50 ms round trip) are 40/s; paced at 0.97 of that, 38.8/s. Counting every answer
    in the window (34 in 0.4 s) would pace at 82/s, twice the limit."""
    now = [99.95]
    lim = RateLimiter(64, clock=lambda: now[0])
    lim.inflight = 100
    now[0] = 100.0
    lim.release(200, sent_at=99.95)  # a round trip of 50 ms
    lim.release(429, retry_after=0.0, sent_at=100.0)
    events = [(99.951 + i * 0.0024 + 0.05, 200, 99.951 + i * 0.0024) for i in range(20)]  # taken before it ran dry
    events += [(100.0 + k * 0.025 + 0.05, 200, 100.0 + k * 0.025) for k in range(1, 15)]
    events += [(100.1, 429, 100.1), (100.2, 429, 100.2)]
    for at, status, sent in sorted(events):
        now[0] = at
        lim.release(status, retry_after=0.0, sent_at=sent)
    assert lim.rate is None
    now[0] = 100.4
    lim.release(429, retry_after=0.0, sent_at=100.4)
    assert lim.rate == pytest.approx(0.97 * 40)


def test_a_lone_429_after_a_slow_spell_lowers_the_pace_a_little():
    """Paced at 40/s, the client itself sends only 30/s for 3 s (a busy machine), with a 429 at each end
    of the spell. Those 3 s measure the client, not the provider (at most its limit got through): the
    pace goes down 3% to 38.8, not to 0.97 x 30."""
    now = [100.0]
    lim = RateLimiter(64, clock=lambda: now[0])
    lim.inflight = 200
    lim.rate, lim._rate_set_at = 40.0, 100.0
    lim.release(429, retry_after=0.0, sent_at=100.0)
    for k in range(90):
        now[0] = 100.0 + k / 30 + 0.05
        lim.release(200, sent_at=100.0 + k / 30)
    now[0] = 103.0
    lim.release(429, retry_after=0.0, sent_at=103.0)
    assert lim.rate == pytest.approx(0.97 * 40)


def test_the_pace_grows_faster_the_longer_no_429_comes():
    """Paced at 40/s from a 429 at t = 100, no 429 since: at t = 104 the pace has grown by
    exp(0.02 x (4 + 4^2 / (2 x 2))) = exp(0.16), to 46.94/s (a constant 2% a second would be 43.30):
    a pace set low by one bad measurement comes back up within seconds."""
    now = [100.0]
    lim = RateLimiter(64, clock=lambda: now[0])
    lim.inflight = 1
    lim.release(429, retry_after=0.0, sent_at=100.0)
    lim.rate, lim._rate_set_at = 40.0, 100.0
    now[0] = 104.0
    asyncio.run(lim.acquire())
    assert lim.rate == pytest.approx(46.94, abs=0.01)
