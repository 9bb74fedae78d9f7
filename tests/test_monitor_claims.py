"""Claims on a rule's pending traces (evaluators/store/monitor_claims.py), on SQLite and PostgreSQL: two claimers
take disjoint batches; a second decide keeps a claim; a claim gone stale is taken and its old binding refused; an
outcome is written once, by the run holding the trace; a silent run is taken over by one taker only. The workers'
side, with real processes killed, is in tests/test_monitor_queue.py."""
from __future__ import annotations

import datetime as dt
import hashlib

import pytest
import sqlalchemy as sa

from evaluators.api import prepare_run
from evaluators.monitor.rules import decide

pytestmark = pytest.mark.both_stores

N = 10
NOW_STALE = dt.timedelta(0)  # a claim or run "silent" since before now: stale at once
LONG = dt.timedelta(hours=1)


def planted(store) -> list[str]:
    store.ensure_monitor_project("shop")
    ids = sorted(hashlib.md5(f"t{i}".encode()).hexdigest() for i in range(N))
    for i, tid in enumerate(ids):
        store.receive_telemetry("shop", [{"trace_id": tid, "span_id": f"{i + 1:016x}", "parent_span_id": "",
                                          "name": "chat", "start_ns": i, "end_ns": i + 1, "attributes": {}}])
        assert store.save_mapped_trace("shop", tid, 1, fields={"query": f"q {tid}", "response": f"a {tid}"},
                                       sources={}, content=True, hint="", conversation_key=None,
                                       completeness="complete")
    store.add_monitor_rule("shop", "r", ["coherence"], 1.0, {"model": "m", "base_url": "http://127.0.0.1:9/v1"})
    with store.engine.begin() as c:  # as if in place before the traffic came: it decides the traces
        c.execute(sa.text("UPDATE monitor_rules SET created_at = '2000-01-01'"))
    assert decide(store, "shop", store.monitor_rule("shop", "r")) == N
    return ids


def a_run(store, n: int) -> str:
    return prepare_run(store, [{"query": f"q{i}", "response": f"a{i}"} for i in range(n)], ["coherence"],
                       {"model": "m", "base_url": "http://127.0.0.1:9/v1"})


def decisions(store) -> dict[str, tuple]:
    """trace -> (decision, run_id, row_idx), read in plain SQL."""
    with store.engine.connect() as c:
        return {t: (d, r, i) for t, d, r, i in c.execute(sa.text(
            "SELECT trace_id, decision, run_id, row_idx FROM monitor_decisions WHERE rule = 'r'"))}


def test_claims_are_disjoint_kept_by_a_second_decide_and_taken_back_only_when_stale(store):
    ids = planted(store)
    t1, first = store.claim_pending("shop", "r", 1, 6, LONG)
    t2, second = store.claim_pending("shop", "r", 1, 6, LONG)
    assert [t["trace_id"] for t in first] == ids[:6] and [t["trace_id"] for t in second] == ids[6:]
    assert first[0]["fields"] == {"query": f"q {ids[0]}", "response": f"a {ids[0]}"}
    assert store.claim_pending("shop", "r", 1, 6, LONG)[1] == []  # nothing free is left
    # another process deciding the same traces at once (it read them as undecided) leaves the claims as they are
    store.add_first_decisions("shop", "r", 1, [{"trace_id": t, "decision": "pending"} for t in ids])
    assert {t: d[1] for t, d in decisions(store).items()} == {**{t: t1 for t in ids[:6]}, **{t: t2 for t in ids[6:]}}
    assert store.claim_pending("shop", "r", 1, 6, LONG)[1] == []

    r1 = a_run(store, 6)
    assert store.bind_claim("shop", "r", 1, t1, r1, [t["trace_id"] for t in first])
    # t2 was never bound (its worker died making its run): stale, its traces are claimed again, and the old
    # claim's binding is refused whole; a bound claim is not taken back this way, however old
    t3, third = store.claim_pending("shop", "r", 1, 6, NOW_STALE)
    assert [t["trace_id"] for t in third] == ids[6:]
    r2 = a_run(store, 4)
    assert not store.bind_claim("shop", "r", 1, t2, r2, ids[6:])
    assert all(decisions(store)[t][1] == t3 for t in ids[6:])
    assert store.bind_claim("shop", "r", 1, t3, r2, ids[6:])
    got = decisions(store)
    assert [got[t] for t in ids[:6]] == [("pending", r1, i) for i in range(6)]
    assert [got[t] for t in ids[6:]] == [("pending", r2, i) for i in range(4)]


def test_an_outcome_is_written_once_by_the_run_holding_the_trace_and_a_silent_run_has_one_taker(store):
    ids = planted(store)
    token, claimed = store.claim_pending("shop", "r", 1, N, LONG)
    rid, other = a_run(store, N), a_run(store, N)
    assert store.bind_claim("shop", "r", 1, token, rid, ids)
    assert store.claimed_rows("shop", "r", 1, rid) == [(t, i) for i, t in enumerate(ids)]
    # just bound: its heartbeat is fresh, nobody takes it over; silent (stale at once), one taker wins
    assert store.orphaned_claims("shop", "r", 1, LONG) == []
    assert store.orphaned_claims("shop", "r", 1, NOW_STALE) == [(rid, False)]
    assert not store.take_over_run(rid, LONG)
    assert store.take_over_run(rid, NOW_STALE) and not store.take_over_run(rid, dt.timedelta(seconds=60))
    outcome = [{"trace_id": t, "decision": "judged"} for t in ids[:4]] + [
        {"trace_id": ids[4], "decision": "failed", "error": "judge said no"}]
    assert store.settle_claimed("shop", "r", 1, other, outcome) == {"judged": 0, "failed": 0, "over_budget": 0}  # not its traces
    assert store.settle_claimed("shop", "r", 1, rid, outcome) == {"judged": 4, "failed": 1, "over_budget": 0}
    assert store.settle_claimed("shop", "r", 1, rid, outcome) == {"judged": 0, "failed": 0, "over_budget": 0}  # once
    got = decisions(store)
    assert [got[t][0] for t in ids] == ["judged"] * 4 + ["failed"] + ["pending"] * 5
    assert store.claimed_rows("shop", "r", 1, rid) == [(t, i) for i, t in enumerate(ids) if i >= 5]
    with store.engine.connect() as c:
        assert c.execute(sa.text("SELECT error FROM monitor_decisions WHERE trace_id = :t"), {"t": ids[4]}).scalar() \
            == "judge said no"
    assert store.claim_pending("shop", "r", 1, N, NOW_STALE)[1] == []  # a run's traces are not claimed as free


def test_a_batch_whose_worker_died_after_its_run_ended_is_settled_from_its_results_asking_nothing(store, judge_server):
    """The worker judged the whole batch and died before writing the decisions: the next round writes them from
    the run's stored results (the judge's values), without asking the judge again; a fresh batch beside it is
    judged as usual."""
    from evaluators.cli.monitor_rounds import RuleEngine
    from evaluators.monitor.claims import judge_pending
    from evaluators.monitor.rules import ROW_FIELDS
    from tests.judge_server import expected_score, prompt_text

    ids = planted(store)
    store.add_monitor_rule("shop", "r", ["coherence"], 1.0, {"model": "m", "base_url": judge_server.url})
    with store.engine.begin() as c:  # (this version too, as if in place before the traffic came)
        c.execute(sa.text("UPDATE monitor_rules SET created_at = '2000-01-01'"))
    rule = store.monitor_rule("shop", "r")
    assert rule["version"] == 2 and decide(store, "shop", rule) == N
    engine = RuleEngine(store)
    token, claimed = store.claim_pending("shop", "r", 2, 6, LONG)  # the dead worker's part, up to its run's end
    rid = engine.prepare([{k: t["fields"][k] for k in ROW_FIELDS if k in t["fields"]} for t in claimed], rule)
    assert store.bind_claim("shop", "r", 2, token, rid, [t["trace_id"] for t in claimed])
    engine.run(rid, rule)
    assert len(judge_server.calls) == 6

    assert judge_pending(store, "shop", rule, engine) == {"judged": N, "failed": 0, "over_budget": 0}
    assert len(judge_server.calls) == N  # the 6 from their results, the 4 others asked once
    planted_values = {t: expected_score(prompt_text(c)) for c in judge_server.calls for t in ids
                      if f"a {t}" in prompt_text(c)}
    with store.engine.connect() as c:
        got = dict(c.execute(sa.text("SELECT d.trace_id, r.value FROM monitor_decisions d JOIN results r ON "
                                     "r.run_id = d.run_id AND r.row_idx = d.row_idx WHERE d.rule_version = 2 AND "
                                     "d.decision = 'judged'")).all())
    assert got == planted_values and set(got) == set(ids)
