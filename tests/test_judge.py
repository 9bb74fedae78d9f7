"""The judge client against a real OpenAI-compatible server on loopback: retries, Retry-After, timeouts."""
from __future__ import annotations

import asyncio
import time

import pytest

from evaluators.errors import UsageError
from evaluators.judge import JudgeClient, JudgeConfig, JudgeError, resolve_api_key
from tests.judge_server import Action, expected_score

MSGS = [{"role": "user", "content": "Rate this: hello"}]


def complete(cfg, msgs=MSGS):
    async def go():
        c = JudgeClient(cfg)
        try:
            return await c.complete(msgs)
        finally:
            await c.aclose()
    return asyncio.run(go())


def test_plain_call_returns_text_tokens_and_latency(judge_server, judge_config):
    r = complete(judge_config.with_(seed=7, temperature=0.2))
    assert f'"score": {expected_score("Rate this: hello")}' in r.text
    assert r.prompt_tokens == len("Rate this: hello") // 4 and r.completion_tokens > 0
    assert r.latency_ms > 0 and r.attempts == 1
    sent = judge_server.calls[0]
    assert (sent["model"], sent["seed"], sent["temperature"], sent["max_tokens"]) == ("test-judge", 7, 0.2, 800)


def test_429_retry_after_is_honoured(judge_server, judge_config):
    judge_server.queue.append(Action(status=429, headers={"Retry-After": "0.6"}))
    t = time.perf_counter()
    r = complete(judge_config)
    elapsed = time.perf_counter() - t
    assert r.attempts == 2 and len(judge_server.calls) == 2
    assert elapsed >= 0.6  # backoff alone would be ~0.01 s


def test_500_then_success(judge_server, judge_config):
    judge_server.queue.extend([Action(status=500), Action(status=503)])
    assert complete(judge_config).attempts == 3


def test_hang_times_out_and_is_retried(judge_server, judge_config):
    judge_server.queue.append(Action(hang=1.5))
    r = complete(judge_config.with_(timeout=0.4))
    assert r.attempts == 2


def test_persistent_failure_gives_up_with_the_reason(judge_server, judge_config):
    judge_server.queue.extend([Action(status=500)] * 10)
    with pytest.raises(JudgeError, match="HTTP 500") as e:
        complete(judge_config.with_(max_retries=2))
    assert e.value.attempts == 3 and len(judge_server.calls) == 3


def test_client_errors_are_not_retried(judge_server, judge_config):
    judge_server.queue.append(Action(status=401))
    with pytest.raises(JudgeError, match="401"):
        complete(judge_config)
    assert len(judge_server.calls) == 1


def test_azure_provider_uses_deployment_path(judge_server):
    cfg = JudgeConfig(model="my-deployment", provider="azure", azure_endpoint=judge_server.root,
                      api_version="2024-10-21", timeout=2, max_retries=0)
    r = asyncio.run(_complete_with_key(cfg, "azure-key"))
    assert '"score"' in r.text
    assert judge_server.calls[0]["_path"] == "/openai/deployments/my-deployment/chat/completions?api-version=2024-10-21"


async def _complete_with_key(cfg, key):
    c = JudgeClient(cfg, api_key=key)
    try:
        return await c.complete(MSGS)
    finally:
        await c.aclose()


def test_keys_come_from_caller_or_environment(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UsageError, match="OPENAI_API_KEY"):
        resolve_api_key(JudgeConfig(provider="openai"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert resolve_api_key(JudgeConfig(provider="openai")) == "sk-env"
    assert resolve_api_key(JudgeConfig(provider="openai"), "sk-given") == "sk-given"
    assert resolve_api_key(JudgeConfig(provider="compatible", base_url="http://x")) is None  # not OpenAI's key
    assert "key" not in str(JudgeConfig().to_dict()).lower().replace("max_tokens", "")


def test_unreadable_retry_after_is_ignored_not_raised(judge_server, judge_config):
    for garbage in ("soon-ish, maybe", "Thu, 99 Foo 20xx 25:61:61 GMT", "inf", "-5", "1e999"):
        judge_server.queue.append(Action(status=429, headers={"Retry-After": garbage}))
    t = time.perf_counter()
    r = complete(judge_config.with_(max_retries=6))
    assert r.attempts == 6 and time.perf_counter() - t < 5  # backoff instead of the garbage


def test_reply_the_client_cannot_read_is_a_judge_error(judge_server, judge_config):
    judge_server.queue.append(Action(raw_body=b'{"choices": [{"message": '))
    with pytest.raises(JudgeError, match="unreadable reply") as e:
        complete(judge_config)
    assert e.value.answered and e.value.attempts == 1


def test_check_judge_names_url_and_model(judge_server, judge_config):
    from evaluators.judge import JudgeUnavailable, check_judge

    assert check_judge(judge_config) == 1 and len(judge_server.probes) == 1
    judge_server.queue.append(Action(raw_body=b"not json"))  # it answered: reachable, key accepted
    assert check_judge(judge_config) == 1
    judge_server.queue.append(Action(status=403))
    with pytest.raises(JudgeUnavailable, match=f"judge at {judge_server.url} \\(model 'test-judge'\\) refused the key"):
        check_judge(judge_config)
    judge_server.queue.extend([Action(status=500)] * 4)
    with pytest.raises(JudgeUnavailable, match="failed its check: InternalServerError") as e:
        check_judge(judge_config)
    assert e.value.attempts == 4  # a server error is retried like any call before giving up


def test_check_of_a_silent_judge_gives_up_after_two_timeouts(judge_server, judge_config):
    from evaluators.judge import JudgeUnavailable, check_judge

    judge_server.queue.extend([Action(hang=1.0)] * 5)
    t = time.perf_counter()
    with pytest.raises(JudgeUnavailable, match="cannot reach the judge") as e:
        check_judge(judge_config.with_(timeout=0.3, max_retries=5))
    assert e.value.attempts == 2 and time.perf_counter() - t < 3


def _openai_request(cfg, key):
    """Where the openai package's own client sends the same call, and with which key header: the
    reference for JudgeClient's thin HTTP path (paths, api-version, Bearer vs api-key)."""
    import openai

    async def go():
        common = dict(api_key=key, max_retries=0, timeout=5)
        if cfg.provider == "azure" and cfg.base_url:
            c = openai.AsyncAzureOpenAI(base_url=cfg.base_url, api_version=cfg.api_version, **common)
        elif cfg.provider == "azure":
            c = openai.AsyncAzureOpenAI(azure_endpoint=cfg.azure_endpoint, api_version=cfg.api_version, **common)
        else:
            c = openai.AsyncOpenAI(base_url=cfg.base_url, **common)
        try:
            await c.chat.completions.create(model=cfg.model, messages=MSGS, temperature=0.0, max_tokens=800)
        finally:
            await c.close()
    asyncio.run(go())


def test_requests_go_where_the_openai_client_sends_them_with_the_key_in_the_same_header(judge_server):
    root = judge_server.root
    configs = [JudgeConfig(model="m1", provider="compatible", base_url=judge_server.url),
               JudgeConfig(model="dep-a", provider="azure", azure_endpoint=root, api_version="2024-10-21"),
               JudgeConfig(model="dep b/c", provider="azure", azure_endpoint=root + "/", api_version="2025-01-01"),
               JudgeConfig(model="dep-d", provider="azure", base_url=root + "/openai", api_version="2024-10-21"),
               JudgeConfig(model="dep-e", provider="azure", base_url=root + "/openai/deployments/fixed",
                           api_version="2024-10-21")]
    for cfg in configs:
        cfg = cfg.with_(timeout=5, max_retries=0)
        judge_server.calls.clear()
        _openai_request(cfg, "sk-ref")
        asyncio.run(_complete_with_key(cfg, "sk-ref"))
        ref, ours = judge_server.calls
        assert ours["_path"] == ref["_path"], cfg
        for h in ("api-key", "Authorization"):
            assert {k.lower(): v for k, v in ours["_headers"].items()}.get(h.lower()) == \
                   {k.lower(): v for k, v in ref["_headers"].items()}.get(h.lower()), (cfg, h)
        assert {k: ours[k] for k in ("model", "messages", "temperature", "max_tokens")} == \
               {k: ref[k] for k in ("model", "messages", "temperature", "max_tokens")}


def test_a_compatible_judge_without_a_key_gets_no_authorization_header(judge_server, judge_config, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-belongs-to-openai")
    complete(judge_config)
    assert judge_server.calls[0]["_auth"] is None and "api-key" not in {k.lower() for k in judge_server.calls[0]["_headers"]}
