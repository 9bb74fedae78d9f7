"""The chat-completions wire format: the body of a call and the reading of its answer, shared by direct calls
(:mod:`evaluators.judge.client`) and the Batch API's input and output files (:mod:`evaluators.judge.batch`)."""
from __future__ import annotations

from typing import Any

from evaluators.judge.config import JudgeConfig


def chat_request(cfg: JudgeConfig, messages: list[dict[str, str]],
                 extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The body of a chat-completions call (a direct call's, and each line of a batch's input file); ``extra``:
    a metric file's further parameters (never replacing ours), with ``logprobs`` on when it asks ``top_logprobs``."""
    params: dict[str, Any] = dict(model=cfg.model, messages=messages, temperature=cfg.temperature,
                                  max_tokens=cfg.max_tokens)
    if cfg.seed is not None:
        params["seed"] = cfg.seed
    if extra:
        params.update({k: v for k, v in extra.items() if k not in params})
        if "top_logprobs" in extra:
            params["logprobs"] = True
    return params


def read_completion(data: Any) -> tuple[str | None, int | None, int | None, str | None, int | None]:
    """A chat completion's body (parsed JSON) read: (text, prompt tokens, completion tokens, finish reason,
    cached prompt tokens). The one reader of a reply, for direct calls and the Batch API's output lines.

    Raises:
        TypeError, AttributeError, KeyError, IndexError: a body that is no chat completion.
    """
    choices = data.get("choices")
    choice = choices[0] if choices else None
    message = choice.get("message") if choice else None
    text = message.get("content") if message else None
    finish = choice.get("finish_reason") if choice else None
    usage = data.get("usage") or {}
    pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if text is not None and not isinstance(text, str):
        raise TypeError(f"message content is {type(text).__name__}, not text")
    return (text, pt if type(pt) is int else None, ct if type(ct) is int else None,
            finish if isinstance(finish, str) else None, cached if type(cached) is int else None)
