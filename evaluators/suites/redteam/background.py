"""A red-team scan in the background, as the dashboard's Red team page starts one: ``python -m evaluators redteam
... --out FOLDER`` in a process of its own, under the store's home (``$EVAL_HOME/redteam/<scan>``), so it outlives
the browser tab that started it and the page only reads its folder.

Keys never go on the command line (``ps`` shows it to anyone on the host) nor into a file: the child gets the
minimal environment a run's worker gets (:func:`evaluators.run.workers.worker_env`: the store's URL, the judge's
one key) plus the target's typed key as ``EVAL_TARGET_API_KEY``, and the command names those variables
(``--target-key-env``, ``--judge-api-key-env``), as a user of the CLI would.

The folder says where the scan is: ``scan.json`` (its settings and command, written before the start), ``log.txt``
(the CLI's output: its progress lines), ``pid`` (the process, for "is it still running"), ``exit`` (its exit code,
written when it ends while this process lives) and, at its end, ``attacks.jsonl`` and ``scorecard.json``.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

from evaluators.core.errors import EvalError, UsageError
from evaluators.judge.config import JudgeConfig
from evaluators.run.workers import KEY_ENV as JUDGE_KEY_ENV, ROOT, worker_env
from evaluators.suites.redteam.multiturn import MAX_BACKTRACKS, MAX_TURNS

TARGET_KEY_ENV = "EVAL_TARGET_API_KEY"  # the target's typed key, in the child's environment only
ATTACKER_KEY_ENV = "EVAL_ATTACKER_API_KEY"  # the attacker model's, likewise
FOLDER = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$")  # a scan's folder name (the URL's ``scan``)
# the CLI's progress lines ("answers: 3/12", "violence verdicts: 5/6"), each after a carriage return
PROGRESS = re.compile(r"([A-Za-z_ -]+): (\d+)/(\d+)")  # ("answers", "violence verdicts", "multi-turn attacks")
EXIT_NO_VERDICT = 5  # cli.redteam: the scan ended, but no attack got a verdict


def scans_home() -> Path:
    """Where the dashboard's scans are: ``redteam/`` under the store's home (``EVAL_HOME``, else ~/.evaldash), as an
    absolute path: the scan runs from the project's folder, so a relative ``--out`` would land elsewhere."""
    return (Path(os.environ.get("EVAL_HOME") or Path.home() / ".evaldash") / "redteam").resolve()


@dataclass
class ScanRequest:
    """A scan as the page sets it (no key: keys travel apart, see :func:`start`)."""

    target_base_url: str
    target_model: str
    judge: JudgeConfig
    risk_categories: list[str]
    strategies: list[str]
    objectives: int = 10
    seed: int = 0
    target_system: str | None = None
    thresholds: dict[str, float] = field(default_factory=dict)
    attacker_base_url: str | None = None  # the attacker model: tense, translation (moderate, difficult), crescendo...
    attacker_model: str | None = None
    objectives_file: str | None = None  # a seed prompts file (the SDK's format), kept in the scan's folder
    over_refusal: bool = False
    understanding: bool = False
    price: str | None = None  # the judge model's price, as --price takes it (IN,CACHED,OUT[,BATCH] USD per 1M)
    budget: float | None = None  # USD the scan's judging stops before exceeding
    max_turns: int = MAX_TURNS  # a crescendo or multi_turn attack's turns at most
    max_backtracks: int = MAX_BACKTRACKS  # a crescendo attack's roll-backs at most
    target_endpoint: str | None = None  # an operator's named endpoint the target is (its key: the server's variable)

    def check(self) -> None:
        """Refuse, before anything starts, what the CLI would refuse at once (say it on the page, not in a log)."""
        from evaluators.suites.redteam.scan import check_categories, resolve_strategies, thresholds_for

        if not (self.target_base_url.strip() and self.target_model.strip()):
            raise UsageError("give the target's base URL and model")
        if not self.strategies:
            raise UsageError("choose at least one strategy (baseline is always added)")
        thresholds_for(check_categories(self.risk_categories), self.thresholds)
        if bool(self.attacker_base_url) != bool(self.attacker_model):
            raise UsageError("give both the attacker model's base URL and its model, or neither")
        resolve_strategies(self.strategies, bool(self.attacker_model))
        if self.objectives_file:
            check_objectives(self.objectives_file, self.risk_categories, self.objectives, self.seed)
        self._check_cost()

    def _check_cost(self) -> None:
        """A bad price, or a budget with no price for the judge model (the CLI's refusals, said before the start)."""
        from evaluators.judge.prices import Price, configured_prices

        if self.price:
            Price.parse(self.price)
        if self.budget is not None:
            if not self.budget > 0:
                raise UsageError(f"a budget is a positive number of USD, got {self.budget!r}")
            if not self.price and self.judge.model not in configured_prices():
                raise UsageError(f"a budget needs the price of the judge model '{self.judge.model}': give its "
                                 "price, or list it in prices.toml")


def check_objectives(path: str | Path, categories: list[str], n: int = 10, seed: int = 0, shown: str | None = None
                     ) -> int:
    """Read a seed prompts file as the scan will (``objectives.load_objectives``: the same reader, the same choice);
    how many objectives the scan would take from it.

    Args:
        shown: the name to say in an error instead of ``path``'s folder (an upload's own name, not where it was put).
    Raises:
        UsageError: the file's error (file, line and field), or a category it has no objective for.
    """
    from evaluators.suites.redteam.objectives import load_objectives

    try:
        return len(load_objectives(list(categories), n, seed, path))
    except UsageError as e:
        if shown is None:
            raise
        raise UsageError(str(e).replace(str(path), shown)) from None


def command(req: ScanRequest, out: Path, target_key: bool, judge_key: bool, attacker_key: bool = False) -> list[str]:
    """The CLI's command for ``req`` writing to ``out``; ``target_key``/``judge_key``/``attacker_key``: whether the
    child's environment holds a typed key for them (then the command names its variable, never the key)."""
    j = req.judge
    # (not --quiet: its progress lines are what the page follows)
    cmd = [sys.executable, "-m", "evaluators", "redteam", "--target-base-url", req.target_base_url.strip(),
           "--target-model", req.target_model.strip(), "--risk-categories", ",".join(req.risk_categories),
           "--strategies", ",".join(req.strategies), "--objectives", str(req.objectives), "--seed", str(req.seed),
           "--temperature", str(j.temperature), "--max-tokens", str(j.max_tokens),
           "--concurrency", str(j.concurrency), "--out", str(out)]
    if req.target_system:
        cmd += ["--target-system", req.target_system]
    if target_key:
        cmd += ["--target-key-env", TARGET_KEY_ENV]
    if req.attacker_model:
        cmd += ["--attacker-base-url", req.attacker_base_url or "", "--attacker-model", req.attacker_model]
        if attacker_key:
            cmd += ["--attacker-key-env", ATTACKER_KEY_ENV]
    for cat, limit in sorted(req.thresholds.items()):
        cmd += ["--threshold", f"{cat}={limit:g}"]
    if req.objectives_file:
        cmd += ["--objectives-file", req.objectives_file]
    cmd += ["--over-refusal"] * req.over_refusal + ["--understanding"] * req.understanding
    if (req.max_turns, req.max_backtracks) != (MAX_TURNS, MAX_BACKTRACKS):
        cmd += ["--max-turns", str(req.max_turns), "--max-backtracks", str(req.max_backtracks)]
    if req.price:
        cmd += ["--price", req.price]
    if req.budget is not None:
        cmd += ["--budget", f"{req.budget:g}"]
    if j.judge_name:  # an operator's named judge: its URL, model and key stay with the server's settings
        return cmd + ["--judge", j.judge_name]
    cmd += ["--judge-model", j.model, "--judge-provider", j.provider]
    if j.base_url:
        cmd += ["--judge-base-url", j.base_url]
    if judge_key:
        cmd += ["--judge-api-key-env", JUDGE_KEY_ENV]
    return cmd


def start(store_url: str, req: ScanRequest, target_key: str | None = None, judge_key: str | None = None,
          attacker_key: str | None = None, objectives: tuple[str, bytes] | None = None) -> str:
    """Start ``req`` in a process of its own; returns the scan's folder name (under :func:`scans_home`).

    Args:
        store_url: the store the scan writes its answers, runs and cache to (through the child's environment).
        target_key, judge_key, attacker_key: keys typed on the page, for the child's environment alone.
        objectives: an uploaded seed prompts file (its name, its bytes): checked, then kept in the scan's folder
            (``objectives.json`` or ``.jsonl``), which the command names, so a resumed scan reads the same file.
    Raises:
        UsageError: a request the CLI would refuse (an objectives file's error names its line and field);
        EvalError: the process could not start.
    """
    req.check()
    if objectives is not None:
        check_upload(*objectives, req.risk_categories, req.objectives, req.seed)
    now = dt.datetime.now(dt.timezone.utc)
    name = f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
    out = scans_home() / name
    out.mkdir(parents=True)
    if objectives is not None:
        kept = out / _upload_name(objectives[0])
        kept.write_bytes(objectives[1])
        req.objectives_file = str(kept)
    meta = {"name": name, "started_at": now.isoformat(timespec="seconds"),
            "settings": {**asdict(req), "judge": req.judge.to_dict()}}
    _launch(out, meta, req, store_url, target_key, judge_key, attacker_key)
    return name


def _upload_name(name: str) -> str:
    return "objectives.json" if name.lower().endswith(".json") else "objectives.jsonl"


def check_upload(name: str, data: bytes, categories: list[str], n: int = 10, seed: int = 0) -> int:
    """An uploaded seed prompts file read as the scan will read it (:func:`check_objectives`), its error naming the
    upload's own name; how many objectives the scan would take from it."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / _upload_name(name)
        path.write_bytes(data)
        return check_objectives(path, categories, n, seed, shown=name)


def _launch(out: Path, meta: dict, req: ScanRequest, store_url: str, target_key: str | None, judge_key: str | None,
            attacker_key: str | None) -> None:
    """The scan's command started into ``out`` (``scan.json`` written first, with ``meta`` and the command)."""
    env = worker_env(req.judge, judge_key, store_url)  # the judge's one key (a typed one as EVAL_JUDGE_API_KEY)
    if req.judge.provider == "azure" and req.judge.azure_endpoint and not req.judge.judge_name:
        env["AZURE_OPENAI_ENDPOINT"] = req.judge.azure_endpoint  # (an address, not a secret: the CLI reads it there)
    if target_key:
        env[TARGET_KEY_ENV] = target_key
    if attacker_key and req.attacker_model:
        env[ATTACKER_KEY_ENV] = attacker_key
    cmd = command(req, out, bool(target_key), bool(judge_key) and not req.judge.judge_name,
                  bool(attacker_key and req.attacker_model))
    (out / "scan.json").write_text(json.dumps({**meta, "command": cmd[1:]}, indent=1) + "\n")
    try:
        with open(out / "log.txt", "ab") as log:
            proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=ROOT)
    except OSError as e:
        (out / "exit").write_text("-1\n")
        raise EvalError(f"the scan could not start: {e}") from None
    (out / "pid").write_text(f"{proc.pid} {socket.gethostname()}\n")

    def reap() -> None:  # its exit code, kept; and no zombie of the dashboard
        (out / "exit").write_text(f"{proc.wait()}\n")

    threading.Thread(target=reap, name=f"reap-redteam-{out.name}", daemon=True).start()


def request_of(name: str) -> ScanRequest:
    """The request a scan was started with (its ``scan.json``), keys apart: they were never kept."""
    settings = dict(json.loads((folder(name) / "scan.json").read_text())["settings"])
    settings["judge"] = JudgeConfig.from_dict(settings["judge"])
    return ScanRequest(**{k: v for k, v in settings.items() if k in ScanRequest.__dataclass_fields__})


def resumable(name: str) -> bool:
    """Whether the scan can be started again as it was: it failed or stopped, and its folder says how it was
    started (``scan.json``, written by :func:`start`)."""
    return state(name)["status"] in ("failed", "stopped") and (folder(name) / "scan.json").is_file()


def keys_typed(name: str) -> dict[str, bool]:
    """Which keys the scan's command took from its environment as typed on the page ("target", "judge",
    "attacker"): a resumed scan needs them typed again."""
    cmd = json.loads((folder(name) / "scan.json").read_text()).get("command") or []
    return {"target": "--target-key-env" in cmd, "judge": "--judge-api-key-env" in cmd,
            "attacker": "--attacker-key-env" in cmd}


def resume(name: str, store_url: str, target_key: str | None = None, judge_key: str | None = None,
           attacker_key: str | None = None, endpoint: tuple[str, str] | None = None) -> None:
    """Start a failed or stopped scan's command again into its own folder: the scan resumes from the store's cache
    (what the target and the judge already answered is not asked again) and writes its files where it did.

    ``endpoint``: for a scan of an operator's named endpoint, its base URL and model as the server configures them
    now (its key goes there, never to the address the scan's folder kept).

    Raises:
        UsageError: the scan is running or has completed; EvalError: the process could not start.
    """
    if not resumable(name):
        raise UsageError(f"scan {name} is {state(name)['status']}: only a failed or stopped scan that the page "
                         "started is resumed")
    out = folder(name)
    req = request_of(name)
    if req.target_endpoint:
        if endpoint is None:
            raise UsageError(f"scan {name} attacked the server endpoint {req.target_endpoint!r}: resume it with that "
                             "endpoint's address as the server configures it now")
        req.target_base_url, req.target_model = endpoint
    req.check()
    meta = json.loads((out / "scan.json").read_text())
    meta["resumed_at"] = [*meta.get("resumed_at", []), dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")]
    (out / "exit").unlink(missing_ok=True)
    with open(out / "log.txt", "a") as log:
        log.write(f"\n(resumed {meta['resumed_at'][-1]})\n")
    _launch(out, meta, req, store_url, target_key, judge_key, attacker_key)


def _alive(out: Path) -> bool | None:
    """Whether the scan's process is alive (None: not known here: another host, or no /proc)."""
    try:
        pid, host = (out / "pid").read_text().split()
    except (OSError, ValueError):
        return None
    if host != socket.gethostname() or not Path("/proc/self/cmdline").exists():
        return None
    try:
        proc = Path(f"/proc/{int(pid)}")
        fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()  # (state, parent, ...) after "(name)"
        cmd = (proc / "cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError, IndexError):
        return False
    if fields[0] == "Z":  # ended, not yet reaped
        return False
    if cmd == [b""]:  # just started: its command line reads empty until its exec is done (a kernel thread's too)
        return fields[1] != "2"
    return b"redteam" in cmd and str(out).encode() in cmd  # a reused pid is another process: it must be this scan's


def progress(log: str) -> list[tuple[str, int, int]]:
    """The latest count of each stage the CLI's output reports, in the order they first appear."""
    last: dict[str, tuple[int, int]] = {}
    for what, done, total in PROGRESS.findall(log):
        last[what.strip()] = (int(done), int(total))
    return [(what, d, t) for what, (d, t) in last.items()]


def state(name: str) -> dict:
    """A scan's state from its folder: ``status`` ("running", "completed", "no verdict", "failed", "stopped"),
    ``progress`` (:func:`progress`), ``log`` (the output's last lines, when it did not complete), ``exit``,
    ``settings`` and ``started_at``.

    Raises:
        UsageError: ``name`` is no scan's folder.
    """
    out = folder(name)
    meta = json.loads((out / "scan.json").read_text()) if (out / "scan.json").exists() else {}
    log = (out / "log.txt").read_text(errors="replace") if (out / "log.txt").exists() else ""
    try:
        code = int((out / "exit").read_text())
    except (OSError, ValueError):
        code = None
    done = (out / "scorecard.json").exists()
    if code is None and _alive(out):
        status = "running"
    elif done and code in (None, 0):
        status = "completed"
    elif done and code == EXIT_NO_VERDICT:
        status = "no verdict"
    else:
        status = "failed" if code is not None else "stopped"
    lines = [x.strip() for x in re.split(r"[\r\n]", log) if x.strip() and not PROGRESS.fullmatch(x.strip())]
    return {"name": name, "status": status, "exit": code, "progress": progress(log),
            "log": lines[-12:] if status != "completed" else [], "settings": meta.get("settings") or {},
            "started_at": meta.get("started_at")}


def folder(name: str) -> Path:
    """The folder of the scan ``name``.

    Raises:
        UsageError: not a scan's folder name, or no such scan.
    """
    out = scans_home() / name
    if not FOLDER.match(name) or not out.is_dir():
        raise UsageError(f"no scan {name!r} under {scans_home()}")
    return out


def scans() -> list[str]:
    """The scans under :func:`scans_home`, newest first."""
    home = scans_home()
    if not home.is_dir():
        return []
    return sorted((p.name for p in home.iterdir() if p.is_dir() and FOLDER.match(p.name)), reverse=True)


def read(name: str) -> tuple[dict, list[dict]]:
    """A finished scan's ``scorecard.json`` and ``attacks.jsonl``."""
    out = folder(name)
    card = json.loads((out / "scorecard.json").read_text())
    attacks = [json.loads(x) for x in (out / "attacks.jsonl").read_text().splitlines() if x.strip()]
    return card, attacks
