"""``run --target-*`` (issue 36): a file of questions only, answered by the model or prompt under test before it is
judged. The answers go to ``DIR/answers.jsonl`` (the file's rows with ``response`` filled) and the run judges that
file as any dataset; what answering cost is printed and kept in ``DIR/target.json``, apart from the judge's."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from evaluators.cli.text import say
from evaluators.core.errors import UsageError

PARAMS = {"temperature": float, "max_tokens": int, "seed": int, "top_p": float}  # --target-param NAME=VALUE


def add_run_options(r) -> None:
    g = r.add_argument_group("answers from a target (a file of questions only: its answers are generated first)")
    g.add_argument("--target-base-url", help="OpenAI-compatible endpoint of the model under test, e.g. "
                   "http://localhost:8000/v1")
    g.add_argument("--target-model", help="the model the target expects")
    g.add_argument("--target-prompt", metavar="FILE", help="the prompt: a template over the row's fields "
                   "({{ query }}, {{ context }}, {{ ground_truth }}; a [system] section allowed); default: the "
                   "question as the user's message, its context as reference documents")
    g.add_argument("--target-system", metavar="TEXT", help="a system message sent before the prompt")
    g.add_argument("--target-param", action="append", metavar="NAME=VALUE",
                   help=f"a sampling parameter of the target's requests ({', '.join(PARAMS)}); default temperature=0")
    g.add_argument("--target-key-env", metavar="VAR", help="name of the environment variable holding the target's "
                   "key (never the key itself)")


def wanted(a) -> bool:
    return bool(a.target_base_url or a.target_model or a.target_prompt)


def _target(a):
    from evaluators.judge.config import JudgeConfig
    from evaluators.run.target import Target

    if not (a.target_base_url and a.target_model):
        raise UsageError("--target-base-url and --target-model go together (and --target-prompt needs them)")
    params = {"temperature": 0.0}
    for item in a.target_param or ():
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in PARAMS:
            raise UsageError(f"--target-param {item!r}: give NAME=VALUE with NAME one of {', '.join(PARAMS)}")
        try:
            params[name.strip()] = PARAMS[name.strip()](value)
        except ValueError:
            raise UsageError(f"--target-param {item!r}: {value!r} is not a {PARAMS[name.strip()].__name__}") from None
    prompt = None
    if a.target_prompt:
        try:
            prompt = Path(a.target_prompt).read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"--target-prompt {a.target_prompt}: cannot read it ({e.strerror or e})") from None
    config = JudgeConfig(model=a.target_model, provider="compatible", base_url=a.target_base_url,
                         concurrency=a.concurrency, timeout=a.timeout, max_retries=a.retries,
                         temperature=params["temperature"], max_tokens=params.get("max_tokens", 800),
                         seed=params.get("seed"))
    return Target(config, a.target_system, prompt, name=Path(a.target_prompt).stem if a.target_prompt else "")


def answer_file(a, metrics: list[str]) -> tuple[str | None, int]:
    """Answer ``a.data``'s questions (each asked once: the store's call cache) into ``DIR/answers.jsonl``, once the
    metrics' names and the target's settings are known good.

    Returns:
        (the answers file's path, 0), or (None, an exit code) when the target left rows unanswered.
    """
    from evaluators.cli.common import EXIT_ERROR, _pairs, key_from_env
    from evaluators.read.exports import write_atomic
    from evaluators.run.target import answer_rows, question_rows

    from evaluators.core.registry import get_metric
    from evaluators.store.store import Store

    for m in metrics:
        get_metric(m)  # a mistyped metric is said now, not after the target has answered every row
    target, key = _target(a), key_from_env("--target-key-env", a.target_key_env)
    store = Store(a.db)
    records, mapping = question_rows(a.data, _pairs(a.map, "--map"))

    def progress(done: int, total: int) -> None:
        if not a.quiet:
            print(f"\r{done}/{total} answers", end="", file=sys.stderr, flush=True)

    usage = answer_rows(store, records, mapping, target, key, progress)
    if not a.quiet and usage.calls:
        print(file=sys.stderr)
    out = Path(a.out)
    facts = {"model": target.config.model, "base_url": target.config.base_url, "system": target.system,
             "prompt_file": a.target_prompt, "identity": target.identity(), **usage.as_dict()}
    write_atomic(out / "target.json", json.dumps(facts, indent=1, ensure_ascii=False) + "\n")
    if usage.failed:
        i, why = next(iter(sorted(usage.failed.items())))
        say(f"error: the target did not answer {len(usage.failed)} of {len(records)} questions (first: row {i + 1}: "
            f"{why}); run the same command again to ask only those", file=sys.stderr)
        return None, EXIT_ERROR
    answers = out / "answers.jsonl"
    write_atomic(answers, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))  # (run's --map applies)
    if not a.quiet:
        say(f"target {target.config.model}: {len(records):,} answers ({usage.calls:,} asked, {usage.cached:,} from the "
            f"cache), {usage.prompt_tokens:,} prompt + {usage.completion_tokens:,} completion tokens, "
            f"{usage.latency_ms / 1000:.1f} s of calls (apart from the judge's; {answers})", file=sys.stderr)
    return str(answers), 0
