"""The store on real SQLite and PostgreSQL: idempotent writes, datasets kept once, one worker per run."""
from __future__ import annotations

import pytest

from evaluators.data.loading import load_dataset
from evaluators.core.errors import EvalError
from evaluators.run.runner import Runner
from evaluators.store.schema import Result
from tests.conftest import SINGLE

pytestmark = pytest.mark.both_stores


def test_dataset_is_stored_once_per_content(store):
    a = store.save_dataset(load_dataset(SINGLE))
    b = store.save_dataset(load_dataset(SINGLE))
    assert a == b and len(store.list_datasets()) == 1
    back = store.get_dataset(a)
    assert back.records == load_dataset(SINGLE).records and back.row_no(30) == 31


def test_results_are_idempotent_per_row_metric_turn(store):
    did = store.save_dataset(load_dataset(SINGLE))
    rid = store.create_run(did, {"metrics": ["bleu"]}, "h", "n")
    store.write_results(rid, [Result(0, "bleu", 0, "error", error="boom")])
    store.write_results(rid, [Result(0, "bleu", 0, "ok", value=0.5, outputs={"bleu_score": 0.5})])
    got = store.load_results(rid)
    assert len(got) == 1 and (got[0].status, got[0].value, got[0].error) == ("ok", 0.5, None)
    assert store.done_keys(rid) == {(0, "bleu", 0)}


def test_one_worker_holds_a_run(store):
    did = store.save_dataset(load_dataset(SINGLE))
    rid = store.create_run(did, {"metrics": ["bleu"], "thresholds": {}, "judge": None, "templates": {}}, "h", "n")
    assert store.claim_run(rid) is True
    assert store.claim_run(rid) is False  # a fresh heartbeat: another worker must not start it
    with pytest.raises(EvalError, match="another worker"):
        Runner(store, rid).run()
    assert store.claim_run(rid, force=True) is True  # the CLI's take-over after a killed process
    store.update_run(rid, status="completed")
    assert Runner(store, rid).run() == "completed"


@pytest.mark.sqlite_only("compares SQLite's driver-level executemany path with SQLAlchemy's upsert, in SQLite files")
def test_sqlite_batch_write_stores_what_sqlalchemy_stores(tmp_path):
    """The driver-level executemany stores, column by column, the text SQLAlchemy's own upsert stores
    (JSON, None as JSON null, booleans, timestamps), and replaces a key's row as it does."""
    import sqlite3

    from evaluators.store.schema import CacheRow, DatasetRow, ResultRow, RunRow
    from evaluators.store.store import Store

    results = [Result(0, "bleu", 0, "ok", value=0.25, outputs={"bleu_score": 0.25, "note": "é — “q”"},
                      meta={"signature": "bleu|tok:sdk"}),
               Result(1, "bleu", 0, "error", error="ZeroDivisionError: x"),
               Result(2, "fluency", 1, "ok", value=4.0, raw="4", reason="r", prompt_tokens=3, completion_tokens=1,
                      latency_ms=12.5, cached=True, outputs=None, meta=None)]
    # one meta dict shared by several results (as the runner does per metric and batch), and another
    results += [Result(3, "bleu", 0, "ok", value=0.5, outputs={"bleu_score": 0.5}, meta=results[0].meta),
                Result(4, "bleu", 0, "ok", value=0.75, outputs={"bleu_score": 0.75}, meta={"signature": "other"})]
    cache = [dict(key="k" * 64, model="m", reply="4", prompt_tokens=3, completion_tokens=1, latency_ms=12.5)]
    dbs = []
    for fast in (True, False):
        store = Store(f"sqlite:///{tmp_path / f'{fast}.db'}")
        with store.session() as s:
            s.add(DatasetRow(id="d", name="n", source="s", content_hash="h", shape="single", detected="c", n_rows=3,
                             columns=[], mapping={}, row_numbers=[]))
            s.flush()
            s.add(RunRow(id="r", dataset_id="d", name="n", spec={}, spec_hash="x"))
            s.commit()
        if fast:
            store.write_results("r", [Result(0, "bleu", 0, "error", error="first")])  # replaced below
            store.write_results("r", results, cache)
        else:  # SQLAlchemy's INSERT ... ON CONFLICT DO UPDATE, as every other database gets
            from evaluators.store.schema import utcnow

            rows = [dict(vars(r), run_id="r", created_at=utcnow()) for r in results]
            for row in rows:
                row["row_idx"] = row.pop("row_idx")
            with store.session() as s:
                store._upsert(s, ResultRow, rows)
                store._upsert(s, CacheRow, [dict(c, created_at=utcnow()) for c in cache])
                s.commit()
        con = sqlite3.connect(tmp_path / f"{fast}.db")
        cols = [c.name for c in ResultRow.__table__.columns if c.name != "created_at"]
        dbs.append((con.execute(f"SELECT {', '.join(cols)}, typeof(created_at), length(created_at) FROM results "
                                "ORDER BY row_idx").fetchall(),
                    con.execute("SELECT key, model, reply, prompt_tokens, completion_tokens, latency_ms "
                                "FROM judge_cache").fetchall()))
        assert [r.outputs for r in store.load_results("r")] == [r.outputs for r in results]
    assert dbs[0] == dbs[1]
    assert dbs[0][0][1][6] == "null"  # outputs None: JSON null, as SQLAlchemy's JSON type writes it


def test_postgresql_copy_writes_store_what_sqlalchemy_stores(postgres):
    """Results and datasets written through PostgreSQL's COPY path (a batch of 64 or more) are, column by
    column, what SQLAlchemy's own INSERT ... ON CONFLICT stores (JSON text, JSON null, booleans, timestamps),
    and a key already stored, or given twice in one batch, ends as its last row."""
    import sqlalchemy as sa

    from evaluators.store.schema import CacheRow, ResultRow, utcnow
    from evaluators.store.store import Store

    results = [Result(i, "bleu" if i % 2 else "fluency", i % 3, "ok" if i % 5 else "error", value=i / 7,
                      outputs=None if i % 4 == 0 else {"bleu_score": i / 7, "note": "é — “q”", "ok": True},
                      reason=f"r{i}", raw=None, error=None if i % 5 else "boom", prompt_tokens=i, cached=bool(i % 2),
                      meta={"signature": "s"} if i % 3 else None) for i in range(100)]
    results.append(Result(3, "bleu", 0, "ok", value=99.0, outputs={"bleu_score": 99.0}))  # key given twice: last wins
    cache = [dict(key=f"{i:064d}", model="m", reply=str(i), prompt_tokens=1, completion_tokens=2, latency_ms=1.5)
             for i in range(70)]
    dumps = []
    for fast in (True, False):
        store = Store(postgres.new_database())
        did = store.save_dataset(load_dataset(SINGLE))
        rid = store.create_run(did, {"metrics": ["bleu"]}, "h", "n")
        if fast:
            store.write_results(rid, [Result(0, "fluency", 0, "error", error="first")] * 70)  # replaced below
            store.write_results(rid, results, cache)
        else:
            now = utcnow()
            rows = {(r.row_idx, r.metric, r.turn): dict(vars(r), run_id=rid, created_at=now) for r in results}
            with store.session() as s:
                store._upsert(s, ResultRow, list(rows.values()))
                store._upsert(s, CacheRow, [dict(c, created_at=now) for c in cache])
                s.commit()
        cols = [c.name for c in ResultRow.__table__.columns if c.name not in ("run_id", "created_at")]
        with store.engine.connect() as c:
            dumps.append((c.execute(sa.text(f"SELECT {', '.join(f'{x}::text' for x in cols)} FROM results "
                                            "ORDER BY results.row_idx, results.metric, results.turn")).all(),
                          c.execute(sa.text("SELECT key, model, reply, prompt_tokens, completion_tokens, latency_ms "
                                            "FROM judge_cache ORDER BY key")).all(),
                          c.execute(sa.text("SELECT idx, data::text FROM dataset_records ORDER BY idx")).all()))
        assert store.get_dataset(did).records == load_dataset(SINGLE).records
    assert dumps[0] == dumps[1]
    assert len(dumps[0][0]) == 100 and dumps[0][0][3][cols.index("value")] == "99"
    assert [r[cols.index("outputs")] for r in dumps[0][0]][0] == "null"  # None: JSON null, as SQLAlchemy writes it
