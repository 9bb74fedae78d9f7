"""Keys go only where they belong: checked at a real loopback server, which records every header.

OPENAI_API_KEY goes only to OpenAI, AZURE_OPENAI_API_KEY only to AZURE_OPENAI_ENDPOINT, and an
OpenAI-compatible URL gets a key only when one is given for it. Named judges (configured by a
server's operator) carry their own URL, model and key, and cannot be pointed elsewhere.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from evaluators import evaluate, prepare_run
from evaluators.core.errors import UsageError
from evaluators.judge.config import JudgeConfig, NamedJudge, named_judges, resolve_api_key
from evaluators.run.runner import Runner
from tests.conftest import ROOT, SINGLE, env_for_subprocess
from tests.judge_server import JudgeServer

SERVER_KEY = "sk-server-openai-0123456789-do-not-leak"
AZURE_KEY = "azure-server-key-9876543210"
TEAM_KEY = "sk-team-llama-5555"
FAST = dict(timeout=2.0, max_retries=1, backoff_base=0.005, backoff_max=0.01)
FIRST5 = [{"query": f"q{i}", "response": f"answer number {i}"} for i in range(5)]


def all_requests(server):
    return server.requests  # judging calls and judge checks, in arrival order


def header_values(server) -> str:
    """Every header value the server received, as one string."""
    return "\n".join(str(v) for r in all_requests(server) for v in r["_headers"].values())


@pytest.fixture
def server_keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEY)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", AZURE_KEY)


def test_openai_key_never_reaches_a_compatible_url(judge_server, store, server_keys):
    evaluate(FIRST5, ["fluency"], judge=JudgeConfig(model="m", provider="compatible", base_url=judge_server.url,
                                                    **FAST), store=store)
    assert len(judge_server.calls) == 5 and len(judge_server.probes) == 1
    assert {r["_auth"] for r in all_requests(judge_server)} == {None}  # no Authorization header at all
    assert SERVER_KEY not in header_values(judge_server) and AZURE_KEY not in header_values(judge_server)


def test_openai_provider_with_another_base_url_gets_no_openai_key(judge_server, store, server_keys):
    evaluate(FIRST5, ["fluency"], judge=JudgeConfig(model="m", provider="openai", base_url=judge_server.url, **FAST),
             store=store)
    assert len(judge_server.calls) == 5
    assert SERVER_KEY not in header_values(judge_server)


def test_a_key_given_for_the_url_goes_there(judge_server, store, server_keys):
    evaluate(FIRST5, ["fluency"], judge=JudgeConfig(model="m", provider="compatible", base_url=judge_server.url,
                                                    **FAST), store=store, api_key="sk-mine-for-this-url")
    assert {r["_auth"] for r in all_requests(judge_server)} == {"Bearer sk-mine-for-this-url"}


def test_openai_key_goes_to_openai_only():
    env = {"OPENAI_API_KEY": SERVER_KEY}
    import os

    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        assert resolve_api_key(JudgeConfig(provider="openai")) == SERVER_KEY
        assert resolve_api_key(JudgeConfig(provider="openai", base_url="https://api.openai.com/v1/")) == SERVER_KEY
        assert resolve_api_key(JudgeConfig(provider="openai", base_url="https://evil.example/v1")) is None
        assert resolve_api_key(JudgeConfig(provider="compatible", base_url="https://api.openai.com/v1")) is None
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def test_azure_key_goes_only_to_the_configured_endpoint(judge_server, store, server_keys, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", judge_server.root)
    cfg = JudgeConfig(model="dep", provider="azure", **FAST)
    evaluate(FIRST5, ["fluency"], judge=cfg, store=store)
    reqs = all_requests(judge_server)
    assert len(reqs) == 6 and all(r["_path"].startswith("/openai/deployments/dep/") for r in reqs)
    assert {r["_headers"].get("api-key") for r in reqs} == {AZURE_KEY}
    assert SERVER_KEY not in header_values(judge_server)
    # the same server under another name is another endpoint: the Azure key is not sent there
    other = judge_server.root.replace("127.0.0.1", "localhost")
    with pytest.raises(UsageError, match="AZURE_OPENAI_API_KEY is sent only to AZURE_OPENAI_ENDPOINT"):
        evaluate(FIRST5, ["coherence"], judge=cfg.with_(azure_endpoint=other), store=store)
    assert len(all_requests(judge_server)) == 6  # refused before any call
    evaluate(FIRST5, ["coherence"], judge=cfg.with_(azure_endpoint=other), store=store, api_key="az-given")
    assert {r["_headers"].get("api-key") for r in all_requests(judge_server)[6:]} == {"az-given"}


def test_cli_key_only_through_a_named_environment_variable(tmp_path, judge_server):
    env = env_for_subprocess(OPENAI_API_KEY=SERVER_KEY, MY_JUDGE_KEY="sk-cli-named-var")
    data = tmp_path / "d.jsonl"
    data.write_text("".join(f'{{"query": "q{i}", "response": "r{i}"}}\n' for i in range(3)))
    base = [sys.executable, "-m", "evaluators", "run", data, "--metrics", "fluency", "--judge-base-url",
            judge_server.url]
    p = subprocess.run([*base, "--out", tmp_path / "a"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert {r["_auth"] for r in all_requests(judge_server)} == {None}
    n = len(all_requests(judge_server))
    p = subprocess.run([*base, "--out", tmp_path / "b", "--temperature", "0.5", "--judge-api-key-env", "MY_JUDGE_KEY"],
                       cwd=ROOT, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert {r["_auth"] for r in all_requests(judge_server)[n:]} == {"Bearer sk-cli-named-var"}
    p = subprocess.run([*base, "--out", tmp_path / "c", "--judge-api-key-env", "NOT_SET_ANYWHERE"],
                       cwd=ROOT, env=env, capture_output=True, text=True)
    assert p.returncode == 2 and "NOT_SET_ANYWHERE is not set" in p.stderr


# ---------------------------------------------------------------------------- named judges
def write_judges(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def team_judges(tmp_path, judge_server, monkeypatch):
    monkeypatch.setenv("TEAM_LLAMA_KEY", TEAM_KEY)
    return write_judges(tmp_path / "evalhome" / "judges.toml", f"""
[team-llama]
provider = "compatible"
base_url = "{judge_server.url}"
model = "llama-team"
key_env = "TEAM_LLAMA_KEY"

[open-box]
base_url = "{judge_server.url}"
model = "open-model"
""")


def test_named_judges_are_read_from_eval_home(team_judges, judge_server):
    judges = named_judges()
    assert judges == {
        "team-llama": NamedJudge("team-llama", "compatible", "llama-team", base_url=judge_server.url,
                                 key_env="TEAM_LLAMA_KEY"),
        "open-box": NamedJudge("open-box", "compatible", "open-model", base_url=judge_server.url)}


def test_eval_judges_names_the_file(tmp_path, monkeypatch):
    f = write_judges(tmp_path / "ops" / "j.toml", '[a]\nprovider = "openai"\nmodel = "gpt-4o"\nkey_env = "OPS_KEY"\n')
    monkeypatch.setenv("EVAL_JUDGES", str(f))
    assert named_judges()["a"] == NamedJudge("a", "openai", "gpt-4o", key_env="OPS_KEY")


@pytest.mark.parametrize("text,match", [
    ("[a\nmodel='x'", "not valid TOML"),
    ('[a]\nbase_url = "http://x/v1"\n', "'model' is required"),
    ('[a]\nmodel = "m"\n', "needs 'base_url'"),
    ('[a]\nmodel = "m"\nbase_url = "http://x/v1"\nkey = "sk-inline"\n', "unknown setting"),
    ('[a]\nmodel = "m"\nbase_url = "http://x/v1"\nkey_env = "sk-123 oops"\n', "NAME of an environment variable"),
])
def test_bad_judges_file_is_named(tmp_path, text, match):
    f = write_judges(tmp_path / "evalhome" / "judges.toml", text)
    with pytest.raises(UsageError, match=match) as e:
        named_judges()
    assert str(f) in str(e.value)


def test_named_judge_uses_its_own_key_and_url(team_judges, judge_server, store, server_keys):
    res = evaluate(FIRST5, ["fluency"], judge=JudgeConfig(judge_name="team-llama", **FAST), store=store,
                   api_key="sk-user-typed")  # the user's key is not what the operator's judge gets
    assert res.status == "completed"
    reqs = all_requests(judge_server)
    assert len(reqs) == 6 and {r["_auth"] for r in reqs} == {f"Bearer {TEAM_KEY}"}
    assert {r["model"] for r in reqs} == {"llama-team"}
    stored = store.get_run(res.run_id)["spec"]["judge"]
    assert stored["judge_name"] == "team-llama" and stored["base_url"] is None  # read at run time, not kept
    evaluate(FIRST5, ["coherence"], judge=JudgeConfig(judge_name="open-box", **FAST), store=store)
    assert {r["_auth"] for r in all_requests(judge_server)[6:]} == {None}  # no key_env: no key


def test_named_judge_cannot_be_redirected(team_judges, judge_server, store, server_keys):
    with JudgeServer() as elsewhere:
        with pytest.raises(UsageError, match="cannot be changed"):
            prepare_run(store, FIRST5, ["fluency"], judge=JudgeConfig(judge_name="team-llama", base_url=elsewhere.url))
        # a stored spec edited to point the named judge elsewhere is refused at run time too
        rid = prepare_run(store, FIRST5, ["fluency"], judge=JudgeConfig(judge_name="team-llama", **FAST))
        run = store.get_run(rid)
        spec = dict(run["spec"], judge=dict(run["spec"]["judge"], base_url=elsewhere.url))
        store.update_run(rid, spec=spec)
        with pytest.raises(UsageError, match="cannot be changed"):
            Runner(store, rid).run()
        assert elsewhere.calls == [] and elsewhere.probes == []
        assert store.get_run(rid)["status"] == "failed"
    with pytest.raises(UsageError, match="no judge named 'nope'"):
        prepare_run(store, FIRST5, ["fluency"], judge=JudgeConfig(judge_name="nope"))


def test_named_judge_url_is_read_at_run_time(team_judges, judge_server, store, server_keys):
    rid = prepare_run(store, FIRST5, ["fluency"], judge=JudgeConfig(judge_name="team-llama", **FAST))
    with JudgeServer() as moved:  # the operator moves the judge before the run starts
        team_judges.write_text(team_judges.read_text().replace(judge_server.url, moved.url))
        assert Runner(store, rid).run() == "completed"
        assert len(moved.calls) == 5 and {r["_auth"] for r in moved.calls} == {f"Bearer {TEAM_KEY}"}
    assert judge_server.calls == []


def test_cli_named_judge(team_judges, judge_server, tmp_path):
    env = env_for_subprocess(OPENAI_API_KEY=SERVER_KEY)
    base = [sys.executable, "-m", "evaluators", "run", SINGLE, "--metrics", "fluency", "--out", tmp_path / "o"]
    p = subprocess.run([*base, "--judge", "team-llama"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert len(judge_server.calls) == 31 and {r["_auth"] for r in all_requests(judge_server)} == {f"Bearer {TEAM_KEY}"}
    for extra in (["--judge-base-url", "http://127.0.0.1:9/v1"], ["--judge-api-key-env", "OPENAI_API_KEY"]):
        p = subprocess.run([*base, "--judge", "team-llama", *extra], cwd=ROOT, env=env, capture_output=True, text=True)
        assert p.returncode == 2 and "sets the judge's URL, model and key" in p.stderr
    p = subprocess.run([*base, "--judge", "nobody"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert p.returncode == 2 and "no judge named 'nobody'" in p.stderr
