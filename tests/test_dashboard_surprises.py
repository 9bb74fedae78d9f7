"""Issue 24, "dead ends and surprises in the browser", through Streamlit's AppTest: each test fails
without its fix (the browser's side is in tests/test_surprises_browser.py)."""
from __future__ import annotations

import json

import pytest

from tests.apptest import app
from tests.test_dashboard_rest import sample_id

st_testing = pytest.importorskip("streamlit.testing.v1")
pytestmark = pytest.mark.usefixtures("fresh_caches")  # each test starts on empty Streamlit caches

KEY = "sk-typed-in-this-tab-0123456789"


def shown(at) -> str:
    """Everything the page shows as text, labels and values of inputs included."""
    parts = [e.value for kind in ("markdown", "caption", "text", "code", "error", "warning", "info", "success")
             for e in getattr(at, kind)]
    parts += [str(w.value) for w in at.text_input]
    return "\n".join(str(p) for p in parts)


# ---------------------------------------------------------------- 1. the judge's settings are kept
def test_judge_settings_are_kept_for_the_browser_session_the_key_in_memory_only(home_store, judge_server, caplog):
    app()
    did = sample_id(home_store)
    at = app("pages/new_run.py", dataset=did)
    at.checkbox(key="new.metric.coherence").check().run()
    at.text_input(key="judge.base_url").input(judge_server.url)
    at.text_input(key="judge.model").input("loopback")
    at.text_input(key="judge_api_key").input(KEY)
    at.number_input(key="judge.concurrency").set_value(3).run()
    # away to another page of the app and back, in the same tab (session)
    at.switch_page("pages/runs.py")
    at.run()
    at.switch_page("pages/new_run.py")
    at.query_params.update({"dataset": did})
    at.run()
    at.checkbox(key="new.metric.coherence").check().run()
    assert at.text_input(key="judge.base_url").value == judge_server.url
    assert at.text_input(key="judge.model").value == "loopback"
    assert at.text_input(key="judge_api_key").value == KEY
    assert at.number_input(key="judge.concurrency").value == 3
    assert any(m.label == "Judge calls" and m.value == "31" for m in at.metric)  # the judge is complete again
    # the key lives in this session's memory only: not in the URL, the store, or a log line
    assert KEY not in json.dumps(at.query_params.to_dict() if hasattr(at.query_params, "to_dict") else dict(at.query_params))
    assert not home_store.list_runs()
    assert KEY not in caplog.text
    # and a new browser session starts blank
    fresh = app("pages/new_run.py", dataset=did)
    fresh.checkbox(key="new.metric.coherence").check().run()
    assert fresh.text_input(key="judge.model").value == "" and fresh.text_input(key="judge_api_key").value == ""
