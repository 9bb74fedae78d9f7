"""Keys out of error text: a provider that echoes the key it was sent in its error message must not have it
stored, written to rows.jsonl or metrics.json, printed, nor shown on the Results page (issue 37)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import sqlalchemy as sa

from evaluators import JudgeConfig, prepare_run
from evaluators.core.redact import redact
from evaluators.run.runner import Runner
from evaluators.store.store import Store
from tests.apptest import app, shown_text
from tests.conftest import ROOT, env_for_subprocess
from tests.judge_server import Action
from evaluators.judge.config import PROBE_PROMPT

KEY = "evaldash-test-key-7f3a"  # shaped like no key pattern: only the configured key's own redaction finds it
SHAPED = "sk-proj-Zx81Qw72Er63Ty54"  # a key the run was not given, found by its shape

# (text, what redact makes of it): secrets gone, ordinary text (URLs, UUIDs, ids, words) kept as written
TABLE = [
    ('Incorrect API key provided: sk-proj-abcDEF123456ghij. See https://platform.openai.com/account/api-keys.',
     "Incorrect API key provided: [redacted]. See https://platform.openai.com/account/api-keys."),
    ("headers: Authorization: Bearer abcdefgh12345", "headers: Authorization: [redacted]"),
    ("rejected Bearer tok_ABCDEF123456", "rejected Bearer [redacted]"),
    ("POST /chat?api-version=2024-06-01&api-key=abcdef123456&x=1",
     "POST /chat?api-version=2024-06-01&api-key=[redacted]&x=1"),
    ('{"api_key": "zzzzzzzzzz", "model": "m"}', '{"api_key": "[redacted]", "model": "m"}'),
    ("key 0123456789abcdef0123456789abcdef is wrong", "key [redacted] is wrong"),  # an Azure key: 32 hex digits
    ("token AAAAbbbbCCCC1111ddddEEEE2222ffffGGGG3333hhhh end", "token [redacted] end"),
    ("request 123e4567-e89b-12d3-a456-426614174000 failed", "request 123e4567-e89b-12d3-a456-426614174000 failed"),
    ("sk-learn-compatible model gpt-4o-mini-2024-07-18 at http://127.0.0.1:8000/v1",
     "sk-learn-compatible model gpt-4o-mini-2024-07-18 at http://127.0.0.1:8000/v1"),
    ("Error code: 429 - rate limited, retry after 20 s (limit 10000 TPM)",
     "Error code: 429 - rate limited, retry after 20 s (limit 10000 TPM)"),
    (f"echo: {KEY}.", "echo: [redacted]."),
    ('as JSON quoted it: {"key": "cl\\u00e9-de-test-9"}', 'as JSON quoted it: {"key": "[redacted]"}'),
]


@pytest.mark.no_store
@pytest.mark.parametrize("text, expected", TABLE)
def test_redact_takes_out_keys_and_key_shapes_only(text, expected):
    assert redact(text, [KEY, None, "short", "clé-de-test-9"]) == expected


@pytest.mark.no_store
def test_short_configured_keys_are_not_looked_for():
    assert redact("unused column: x", ["unused", "x"]) == "unused column: x"


def stored_text(url: str) -> str:
    """Every row of every table of the store, as text."""
    engine = sa.create_engine(url)
    try:
        meta = sa.MetaData()
        meta.reflect(engine)
        with engine.connect() as c:
            return "\n".join(str(tuple(row)) for t in meta.sorted_tables for row in c.execute(sa.select(t)))
    finally:
        engine.dispose()


def echo(status: int, *, probe: bool = False) -> Action:
    """An error reply quoting the key back, as some providers do (and an unrelated key-shaped string)."""
    msg = f"Incorrect API key provided: {KEY}. Your request: Authorization: Bearer {KEY}; related: {SHAPED}"
    return Action(status=status, raw_body=json.dumps({"error": {"message": msg, "type": "invalid_request_error",
                                                                 "code": "probe" if probe else "row"}}).encode())


@pytest.mark.both_stores
@pytest.mark.usefixtures("fresh_caches")
def test_an_echoed_key_is_nowhere(store_url, judge_server, tmp_path, monkeypatch):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"query": f"q{i}", "response": f"answer row-{i}"}) + "\n" for i in range(4)))
    judge_server.on_prompt("answer row-1", echo(400))  # a 400 is not retried: row 2's error at once
    env = env_for_subprocess(MY_JUDGE_KEY=KEY)
    base = [sys.executable, "-m", "evaluators", "run", data, "--metrics", "fluency", "--judge-base-url",
            judge_server.url, "--judge-api-key-env", "MY_JUDGE_KEY", "--retries", "1", "--db", store_url]
    p = subprocess.run([*base, "--out", tmp_path / "a"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert {c["_auth"] for c in judge_server.calls} == {f"Bearer {KEY}"}  # the key was sent, and echoed
    store = Store(store_url)
    (run,) = store.list_runs()
    errors = [r for r in (json.loads(line) for line in (tmp_path / "a" / "rows.jsonl").read_text().splitlines())
              if any("error" in k and v for k, v in r.items())]
    assert len(errors) == 1 and "Incorrect API key provided: [redacted]" in json.dumps(errors)

    judge_server.on_prompt(PROBE_PROMPT, echo(400, probe=True))  # the judge's check fails, echoing the key
    q = subprocess.run([*base, "--out", tmp_path / "b"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert q.returncode != 0 and "failed its check" in q.stderr
    failed = next(r for r in store.list_runs() if r["id"] != run["id"])
    assert failed["status"] == "failed" and "[redacted]" in failed["error"]

    monkeypatch.setenv("EVAL_DATABASE_URL", store_url)  # the dashboard reads this store
    pages = [shown_text(app("pages/results.py", run=rid, view=view, allow_errors=True))
             for rid in (run["id"], failed["id"]) for view in ("Rows", "Errors")]
    assert "[redacted]" in pages[1]  # the Errors tab shows the error, without the key
    for where, text in [("store", stored_text(store_url)), ("CLI output", p.stdout + p.stderr + q.stdout + q.stderr),
                        *[(f.name, f.read_text()) for f in tmp_path.glob("*/*.json*")], *[("page", t) for t in pages]]:
        assert KEY not in text and SHAPED not in text, where


def test_a_batch_requests_error_is_redacted_by_the_runner(store, judge_server, monkeypatch):
    """A Batch API request refused with the key in its message: the error comes from the batch's error file,
    not from the client's own calls, so only the runner's redaction stands between it and the store."""
    monkeypatch.setenv("EVAL_BATCH_POLL", "0.02")  # (as tests/test_batch.py polls)
    api = judge_server.batch_api
    api.error_on, api.error_message = "answer row-1", f"Incorrect API key provided: {KEY}"
    records = [{"query": f"q{i}", "response": f"answer row-{i}"} for i in range(3)]
    judge = JudgeConfig(model="gpt-4o-mini", provider="compatible", base_url=judge_server.url, max_retries=1)
    rid = prepare_run(store, records, ["fluency"], judge, cost={"batch": True})
    assert Runner(store, rid, api_key=KEY).run() == "completed"
    (bad,) = [r for r in store.load_results(rid) if r.status != "ok"]
    assert bad.error.endswith("Incorrect API key provided: [redacted]")


def test_a_batch_error_cut_to_length_keeps_no_part_of_a_key(store, judge_server, monkeypatch):
    """Found by review: a Batch API error was cut to 500 characters before the runner took its keys out, so a key
    straddling the cut was stored in part (31 of 32 characters). The cut now comes after: whatever the padding,
    no 8 characters of the key remain, and the stored error is at most 500 characters."""
    monkeypatch.setenv("EVAL_BATCH_POLL", "0.02")
    api = judge_server.batch_api
    records = [{"query": f"q{i}", "response": f"answer row-{i}"} for i in range(2)]
    judge = JudgeConfig(model="gpt-4o-mini", provider="compatible", base_url=judge_server.url, max_retries=1)
    for pad in range(440, 500, 8):  # the key starts before the old cut and ends past it, for some of these
        api.error_on, api.error_message = "answer row-1", "p" * pad + f" {KEY} trailing words"
        rid = prepare_run(store, records, ["fluency"], judge, cost={"batch": True})
        assert Runner(store, rid, api_key=KEY).run() == "completed"
        (bad,) = [r for r in store.load_results(rid) if r.status != "ok"]
        assert len(bad.error) <= 500
        assert not any(KEY[k:k + 8] in bad.error for k in range(len(KEY) - 7)), bad.error[-60:]
