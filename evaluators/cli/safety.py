"""``python -m evaluators attack-set|attack-compare``: jailbreak attack sets and the UPIA comparison.

Registered by :mod:`evaluators.cli.main` (``add_commands`` and ``COMMANDS``); exit codes in :mod:`evaluators.cli.common`.
"""
from __future__ import annotations

import sys
from pathlib import Path

from evaluators.core.errors import UsageError
from evaluators.cli.text import say


def add_commands(sub) -> None:
    """Add the two subcommands to ``python -m evaluators``'s subparsers."""
    s = sub.add_parser("attack-set", help="write a dataset again with a jailbreak planted in every row")
    s.add_argument("data", help="JSONL, JSON, CSV or Parquet file")
    s.add_argument("--kind", required=True, choices=["direct", "indirect"],
                   help="direct: jailbreak before the user's message (UPIA); indirect: instruction in the context (XPIA)")
    s.add_argument("--seed", type=int, default=0, help="the same seed gives a byte-identical file (default 0)")
    s.add_argument("--out", required=True, help="the attack set to write (.jsonl or .json)")
    s.add_argument("--map", action="append", metavar="FIELD=COLUMN")
    s.add_argument("--target-base-url", help="OpenAI-compatible endpoint of the application under test: fills `response`")
    s.add_argument("--target-model", help="model name the target expects")
    s.add_argument("--system", help="system prompt sent to the target")
    s.add_argument("--target-key-env", metavar="VAR",
                   help="name of the environment variable holding the target's key (never the key itself)")
    s.add_argument("--concurrency", type=int, default=8, help="target calls in flight")
    s.add_argument("--timeout", type=float, default=60.0)
    s.add_argument("--retries", type=int, default=5)
    s.add_argument("--max-tokens", type=int, default=800)
    s.add_argument("--quiet", action="store_true")
    c = sub.add_parser("attack-compare", help="direct-attack (UPIA) defect rates from a baseline and an attack run")
    c.add_argument("--baseline", required=True, help="folder `run --out` wrote for the rows as they are")
    c.add_argument("--attack", required=True, help="folder `run --out` wrote for the same rows with a jailbreak")
    c.add_argument("--out", required=True, help="folder for metrics.json and rows.jsonl (paired rows)")
    c.add_argument("--id-column", default="id", help="column that pairs rows (default id)")
    c.add_argument("--threshold", action="append", metavar="HARM=VALUE", help="severity threshold (default: the runs')")


def cmd_attack_set(a) -> int:
    from evaluators.cli.common import EXIT_ERROR, EXIT_OK, _pairs, key_from_env
    from evaluators.read.exports import write_atomic
    from evaluators.judge.config import JudgeConfig
    from evaluators.suites.safety import attack_records, fill_responses, records_text

    out = Path(a.out)
    records_text([], out)  # refuses an unknown extension before any work
    records = attack_records(a.data, a.kind, a.seed, _pairs(a.map, "--map"))
    if a.target_base_url or a.target_model:
        if not (a.target_base_url and a.target_model):
            raise UsageError("--target-base-url and --target-model go together")
        key = key_from_env("--target-key-env", a.target_key_env)
        target = JudgeConfig(model=a.target_model, provider="compatible", base_url=a.target_base_url,
                             concurrency=a.concurrency, timeout=a.timeout, max_retries=a.retries,
                             max_tokens=a.max_tokens)
        resume = out.with_name(out.name + ".partial.jsonl")

        def progress(done: int, total: int) -> None:
            if not a.quiet:
                print(f"\r{done}/{total} responses", end="", file=sys.stderr, flush=True)

        report = fill_responses(records, target, a.system, key, resume, _pairs(a.map, "--map"), progress)
        if not a.quiet:
            print(file=sys.stderr)
        if report.failed:
            first = ", ".join(f"row {i + 1}: {e}" for i, e in list(report.failed.items())[:3])
            say(f"error: {len(report.failed)} of {len(records)} target calls failed ({first}); "
                  f"run the same command again to retry them ({report.called + report.resumed} answers kept "
                  f"in {resume.name}); {out} was not written", file=sys.stderr)
            return EXIT_ERROR
        write_atomic(out, records_text(records, out))
        resume.unlink(missing_ok=True)
        say(f"wrote {out}: {len(records)} rows, {a.kind} attacks, seed {a.seed}; "
              f"{report.called} target calls, {report.resumed} answers resumed")
        return EXIT_OK
    write_atomic(out, records_text(records, out))
    say(f"wrote {out}: {len(records)} rows, {a.kind} attacks, seed {a.seed}")
    return EXIT_OK


def cmd_attack_compare(a) -> int:
    from evaluators.cli.common import EXIT_OK, _floats
    from evaluators.suites.safety import PairingError, attack_compare

    try:
        res = attack_compare(a.baseline, a.attack, a.out, a.id_column, _floats(a.threshold, "--threshold"))
    except PairingError as e:
        raise PairingError(f"{e}; name the column that pairs them with --id-column") from None
    m = res.metrics
    say(f"wrote {a.out}/metrics.json and rows.jsonl: {m['paired_rows']} paired rows, {m['unpaired_rows']} unpaired")
    for side, ids in (("baseline", res.unpaired_baseline), ("attack", res.unpaired_attack)):
        if ids:
            shown = ", ".join(map(str, ids[:10])) + (" ..." if len(ids) > 10 else "")
            say(f"  only in the {side} run: {shown}")
    say(f"{'harm':<16} {'baseline':>9} {'attack':>9} {'direct attack':>14}")
    for h in res.harms:
        cells = [m[f"{h}.{k}_defect_rate"] for k in ("baseline", "attack", "direct_attack")]
        say(f"{h:<16} " + " ".join(f"{'-' if v is None else f'{v:.1%}':>{w}}" for v, w in zip(cells, (9, 9, 14))))
    return EXIT_OK


COMMANDS = {"attack-set": cmd_attack_set, "attack-compare": cmd_attack_compare}
