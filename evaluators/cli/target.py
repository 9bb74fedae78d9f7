"""``run --target-*`` (issue 36): a file of questions only, answered by the model or prompt under test before it is
judged. The answers go to ``DIR/answers.jsonl`` (the file's rows with ``response`` filled) and the run judges that
file as any dataset; what answering cost is printed and kept in ``DIR/target.json`` and with the run, apart from
the judge's, and a ``--budget`` covers both.

Variants: several ``--target-prompt`` files and/or several models in ``--target-model a,b`` make one experiment,
every prompt with every model, each variant a run of its own (``DIR/<variant>/``) named "experiment · variant";
the first variant is the baseline each other is compared with (:mod:`evaluators.cli.experiment`)."""
from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

from evaluators.cli.text import say
from evaluators.core.errors import UsageError

PARAMS = {"temperature": float, "max_tokens": int, "seed": int}  # --target-param NAME=VALUE


def add_run_options(r) -> None:
    g = r.add_argument_group("answers from a target (a file of questions only: its answers are generated first)")
    g.add_argument("--target-base-url", help="OpenAI-compatible endpoint of the model under test, e.g. "
                   "http://localhost:8000/v1")
    g.add_argument("--target-model", help="the model the target expects; several, comma-separated, make variants "
                   "of one experiment (each a run, compared with the first)")
    g.add_argument("--target-prompt", metavar="FILE", action="append", help="the prompt: a template over the row's "
                   "fields ({{ query }}, {{ context }}, {{ ground_truth }}; a [system] section allowed); default: the "
                   "question as the user's message, its context as reference documents. Given twice or more: "
                   "variants of one experiment")
    g.add_argument("--target-system", metavar="TEXT", help="a system message sent before the prompt")
    g.add_argument("--target-param", action="append", metavar="NAME=VALUE",
                   help=f"a sampling parameter of the target's requests ({', '.join(PARAMS)}); default temperature=0")
    g.add_argument("--target-key-env", metavar="VAR", help="name of the environment variable holding the target's "
                   "key (never the key itself)")
    g.add_argument("--target-price", metavar="IN,CACHED,OUT", help="the target model's price in USD per 1M tokens "
                   "(else prices.toml's entry for it): its answers' cost is reported and counts against --budget")
    g.add_argument("--target-callback", metavar="MODULE:FUNCTION", help="a Python function answering each row "
                   "instead of a model (as the Azure SDK's target: called with the row's columns, returning a dict "
                   "whose keys become columns target.<key>, response at least)")
    g.add_argument("--experiment", metavar="NAME", help="the experiment's name in its runs' names (default: the "
                   "data file's name)")


def wanted(a) -> bool:
    return bool(a.target_base_url or a.target_model or a.target_prompt or a.target_callback)


def _params(a) -> dict:
    params = {"temperature": 0.0}
    for item in a.target_param or ():
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in PARAMS:
            raise UsageError(f"--target-param {item!r}: give NAME=VALUE with NAME one of {', '.join(PARAMS)}")
        try:
            params[name.strip()] = PARAMS[name.strip()](value)
        except ValueError:
            raise UsageError(f"--target-param {item!r}: {value!r} is not a {PARAMS[name.strip()].__name__}") from None
    return params


def variants(a) -> list:
    """Every prompt with every model: (the target, its prompt file), each named uniquely; [] for a callback."""
    from evaluators.judge.config import JudgeConfig
    from evaluators.run.target import Target

    if a.target_callback:
        if a.target_base_url or a.target_model or a.target_prompt:
            raise UsageError("--target-callback answers the rows itself: drop --target-base-url, --target-model and "
                             "--target-prompt")
        return []
    if not (a.target_base_url and a.target_model):
        raise UsageError("--target-base-url and --target-model go together (and --target-prompt needs them)")
    params, prompts = _params(a), []
    for path in a.target_prompt or [None]:
        try:
            prompts.append((Path(path).stem, Path(path).read_text(encoding="utf-8")) if path else ("", None))
        except OSError as e:
            raise UsageError(f"--target-prompt {path}: cannot read it ({e.strerror or e})") from None
    models = [m.strip() for m in a.target_model.split(",") if m.strip()]
    out = []
    for model in models:
        for stem, text in prompts:
            name = " · ".join(x for x in (stem if len(prompts) > 1 else "", model if len(models) > 1 else "") if x)
            config = JudgeConfig(model=model, provider="compatible", base_url=a.target_base_url,
                                 concurrency=a.concurrency, timeout=a.timeout, max_retries=a.retries,
                                 temperature=params["temperature"], max_tokens=params.get("max_tokens", 800),
                                 seed=params.get("seed"))
            out.append((Target(config, a.target_system, text, name=name or stem), path))
    names = [t.name for t, _ in out]
    if len(set(names)) != len(names):
        raise UsageError(f"two variants would both be named {next(n for n in names if names.count(n) > 1)!r}: give "
                         "each --target-prompt file its own name")
    return out


def folder(name: str) -> str:
    """A variant's folder under --out: its name with anything but letters, digits, '.', '-' and '_' as '-'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "variant"


def experiment_name(a) -> str:
    return a.experiment or Path(a.data).name


def target_price(a, model: str):
    """The target model's price: --target-price, else prices.toml's; a --budget with neither is refused."""
    from evaluators.judge.prices import Price, configured_prices

    price = Price.parse(a.target_price) if a.target_price else configured_prices().get(model)
    if price is None and a.budget is not None:
        raise UsageError(f"--budget covers the target's answers too and needs the price of the target model "
                         f"'{model}': give --target-price INPUT,CACHED,OUTPUT (0,0,0 for your own server) or list "
                         "it in prices.toml")
    return price


def for_variant(a, target, prompt_file: str | None, several: bool):
    """``a`` for one variant's run: its own --out folder and run name."""
    b = copy.copy(a)
    b.prompt_file = prompt_file
    if several:
        b.out = str(Path(a.out) / folder(target.name))
    b.run_name = f"{experiment_name(a)} · {target.name}" if target.name else None
    b.variant = target
    return b


def answer_file(a, metrics: list[str]) -> tuple[str | None, int]:
    """Answer ``a.data``'s questions (each asked once: the store's call cache) by ``a.variant`` (or the function of
    --target-callback) into ``DIR/answers.jsonl``, once the metrics' names and the target's settings are known
    good. Sets ``a.target_facts`` (kept with the run).

    Returns:
        (the answers file's path, 0), or (None, an exit code) when the target left rows unanswered.
    """
    from evaluators.cli.common import EXIT_ERROR, _pairs, key_from_env
    from evaluators.core.registry import get_metric
    from evaluators.read.exports import write_atomic
    from evaluators.run.target import answer_rows, call_rows, load_callback, question_rows, target_facts
    from evaluators.store.store import Store

    for m in metrics:
        get_metric(m)  # a mistyped metric is said now, not after the target has answered every row
    out = Path(a.out)
    records, mapping = question_rows(a.data, _pairs(a.map, "--map"))
    if a.target_callback:
        call_rows(records, load_callback(a.target_callback), f"--target-callback {a.target_callback}")
        a.map = [m for m in a.map or [] if not m.startswith("response=")] + ["response=target.response"]
        return _written(out / "answers.jsonl", records, write_atomic), 0
    target = a.variant
    price = target_price(a, target.config.model)
    key = key_from_env("--target-key-env", a.target_key_env)

    def progress(done: int, total: int) -> None:
        if not a.quiet:
            print(f"\r{done}/{total} answers", end="", file=sys.stderr, flush=True)

    usage = answer_rows(Store(a.db), records, mapping, target, key, progress, price=price, budget=a.budget)
    if not a.quiet and usage.calls:
        print(file=sys.stderr)
    a.target_facts = {**target_facts(target, usage, experiment_name(a)), "prompt_file": a.prompt_file}
    write_atomic(out / "target.json", json.dumps(a.target_facts, indent=1, ensure_ascii=False) + "\n")
    if usage.failed:
        i, why = next(iter(sorted(usage.failed.items())))
        say(f"error: the target did not answer {len(usage.failed)} of {len(records)} questions (first: row {i + 1}: "
            f"{why}); run the same command again to ask only those", file=sys.stderr)
        return None, EXIT_ERROR
    answers = _written(out / "answers.jsonl", records, write_atomic)  # (run's --map applies)
    if not a.quiet:
        cost = "" if usage.usd is None else f", ${usage.usd:,.4f}"
        say(f"target {target.config.model}{f' ({target.name})' if target.name else ''}: {len(records):,} answers "
            f"({usage.calls:,} asked, {usage.cached:,} from the cache), {usage.prompt_tokens:,} prompt + "
            f"{usage.completion_tokens:,} completion tokens, {usage.latency_ms / 1000:.1f} s of calls{cost} (apart "
            f"from the judge's; {answers})", file=sys.stderr)
    return answers, 0


def _written(path: Path, records: list[dict], write_atomic) -> str:
    write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return str(path)
