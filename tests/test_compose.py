"""The team deployment (docker-compose.yml, the Dockerfile, .env.example, judges.example.toml) as its processes.

This machine has Docker's client but no daemon, so Compose cannot run here. What the files tell the containers
to do is run instead as processes against the tests' loopback PostgreSQL: each service's command and
environment read from docker-compose.yml (``${VAR}``, ``${VAR:-default}`` and ``${VAR:?message}`` filled from
.env.example, as Compose fills them from .env), the dashboard's command from the Dockerfile. Only the
database's host and port (the ``postgres`` service's, inside Compose's network) are swapped for the loopback
server's. What is left untested: building the image and Compose's own start-up order.
"""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import urllib.request

import pytest
import yaml
from sqlalchemy.engine import make_url

from evaluators.store.store import Store
from tests.conftest import ROOT, SINGLE, env_for_subprocess
from tests.procs import wait_until
from tests.test_queue import stop

SECRET = "sk-team-compose-2718"


def dotenv(path) -> dict[str, str]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            out[name.strip()] = value.strip()
    return out


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's variable substitution (the three forms the file uses)."""
    def one(m: re.Match) -> str:
        name, op, arg = m.group(1), m.group(2), m.group(3)
        value = env.get(name, "")
        if op == ":?" and not value:
            raise AssertionError(f"docker-compose.yml needs {name}: {arg}")
        return value or (arg if op == ":-" else "")
    return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", one, text)


@pytest.fixture
def compose():
    env = dotenv(ROOT / ".env.example") | {"TEAM_JUDGE_KEY": SECRET}  # .env as its reader fills it in
    return yaml.safe_load(interpolate((ROOT / "docker-compose.yml").read_text(encoding="utf-8"), env)), env


def test_every_variable_the_compose_file_uses_is_in_the_env_example_and_every_judge_key_reaches_the_workers(compose):
    spec, env = compose
    used = set(re.findall(r"\$\{(\w+)", (ROOT / "docker-compose.yml").read_text(encoding="utf-8")))
    assert used and used <= set(env), used - set(env)
    judges = tomllib.loads((ROOT / "judges.example.toml").read_text(encoding="utf-8"))
    worker_env = spec["services"]["worker"]["environment"]
    for name, judge in judges.items():
        assert judge["key_env"] in worker_env, name  # a named judge's key variable is passed to the workers
    assert "TEAM_JUDGE_KEY" not in spec["services"]["dashboard"]["environment"]  # keys only where they are used
    for service in ("dashboard", "worker"):  # the judges file is mounted where EVAL_JUDGES says
        mounts = [v.split(":")[1] for v in spec["services"][service]["volumes"]]
        assert spec["services"][service]["environment"]["EVAL_JUDGES"] in mounts


def test_the_services_commands_serve_a_team_migrate_dashboard_workers_submit_wait(compose, postgres, judge_server,
                                                                                   tmp_path):
    """migrate (`db upgrade`) makes the store; the dashboard (the Dockerfile's command) answers; two workers (the
    worker service's command, its environment) judge a run submitted with the team's named judge, the key
    reaching them only through their own environment."""
    spec, _ = compose
    services = spec["services"]
    here = make_url(postgres.new_database())
    url = make_url(services["migrate"]["environment"]["EVAL_DATABASE_URL"])
    assert (url.drivername, url.username) == ("postgresql+psycopg", "evals")
    url = url.set(host=here.host, port=here.port, database=here.database).render_as_string(hide_password=False)
    judges = tmp_path / "judges.toml"  # judges.example.toml, its URL the loopback judge's
    example = (ROOT / "judges.example.toml").read_text(encoding="utf-8")
    judges.write_text(re.sub(r'base_url = ".*"', f'base_url = "{judge_server.url}"', example), encoding="utf-8")
    judge_server.require_key = SECRET

    def env_of(service: str, **extra: str) -> dict[str, str]:
        env = {k: str(v) for k, v in services[service]["environment"].items()}
        env.update(EVAL_DATABASE_URL=url, EVAL_HOME=str(tmp_path / service), **extra)
        if "EVAL_JUDGES" in env:
            env["EVAL_JUDGES"] = str(judges)
        return env_for_subprocess(**env)

    def command(service: str) -> list[str]:
        cmd = services[service]["command"]
        assert cmd[0] == "python"
        return [sys.executable, *cmd[1:]]

    migrate = subprocess.run(command("migrate"), cwd=ROOT, env=env_of("migrate"), capture_output=True, text=True,
                             timeout=120)
    assert migrate.returncode == 0, migrate.stderr
    from sqlalchemy import create_engine, text

    from evaluators.store.schema import SCHEMA_REVISION

    engine = create_engine(url)  # looked at before anything else opens it (Store() would make the tables itself)
    with engine.connect() as c:
        assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == SCHEMA_REVISION
    engine.dispose()

    cmd = re.search(r"^CMD (\[.*\])$", (ROOT / "Dockerfile").read_text(encoding="utf-8"), re.M)
    dashboard_cmd = yaml.safe_load(cmd.group(1))
    assert dashboard_cmd[:3] == ["python", "-m", "streamlit"]
    port = services["dashboard"]["ports"][0].split(":")[1]
    from tests.browser import free_port

    mine = str(free_port())
    argv = [sys.executable, *dashboard_cmd[1:], "--server.port", mine]
    argv[argv.index("0.0.0.0")] = "127.0.0.1"  # (all interfaces inside the container; loopback here)
    assert port == "8501"  # what the Dockerfile's Streamlit listens on by default
    procs = [subprocess.Popen(argv, cwd=ROOT, env=env_of("dashboard"), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]
    procs += [subprocess.Popen(command("worker"), cwd=ROOT, env=env_of("worker"), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE) for _ in range(2)]
    try:
        def healthy() -> bool:
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{mine}/_stcore/health", timeout=1).read() == b"ok"
            except OSError:
                return False
        wait_until(healthy, what="the dashboard answering", timeout=60)
        samples = len(list((ROOT / "data").glob("*.jsonl")))  # the dashboard, started, opens the store and adds them
        wait_until(lambda: len(Store(url).list_datasets()) == samples, what="the bundled samples in the store",
                   timeout=60)
        cli_env = env_for_subprocess(EVAL_DATABASE_URL=url, EVAL_JUDGES=str(judges), EVAL_HOME=str(tmp_path / "me"),
                                     TEAM_JUDGE_KEY=SECRET)  # submit checks the judge with one call, as run does
        p = subprocess.run([sys.executable, "-m", "evaluators", "submit", SINGLE, "--metrics", "fluency",
                            "--judge", "team-judge", "--chunk-rows", "10"], cwd=ROOT, env=cli_env,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        rid = p.stdout.split()[-1]
        w = subprocess.run([sys.executable, "-m", "evaluators", "wait", rid, "--out", str(tmp_path / "out")],
                           cwd=ROOT, env=cli_env, capture_output=True, text=True, timeout=180)
        assert w.returncode == 0, w.stdout + w.stderr
    finally:
        stop(*procs)
    run = Store(url).get_run(rid)
    assert (run["status"], run["tasks_done"], run["tasks_errored"]) == ("completed", 31, 0)
    assert len(judge_server.calls) == 31  # each row judged once, with the worker's key (any other gets 401)


def test_the_receiver_service_takes_an_apps_traces_into_the_team_store(compose, postgres):
    """The receiver service's command and environment (its store the migrate service's) receive a trace sent with
    a token made by the CLI against the same store."""
    from tests.monitor_procs import pb_span, traces_request

    spec, _ = compose
    service = spec["services"]["receiver"]
    assert service["environment"] == spec["services"]["migrate"]["environment"]  # the team's store
    assert service["ports"] == ["4318:4318"] and service["command"][-1] == "4318"
    here = make_url(postgres.new_database())
    url = make_url(service["environment"]["EVAL_DATABASE_URL"]).set(host=here.host, port=here.port,
                                                                     database=here.database)
    url = url.render_as_string(hide_password=False)
    env = env_for_subprocess(EVAL_DATABASE_URL=url)
    assert subprocess.run([sys.executable, *spec["services"]["migrate"]["command"][1:]], cwd=ROOT, env=env,
                          timeout=120).returncode == 0
    made = subprocess.run([sys.executable, "-m", "evaluators", "monitor", "token", "create", "--project", "shop"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    token = made.stdout.split()[-1]
    argv = [sys.executable, *service["command"][1:]]
    argv[argv.index("0.0.0.0")] = "127.0.0.1"  # (all interfaces inside the container; loopback here)
    argv[-1] = "0"  # any free port
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = int(proc.stdout.readline().split("http://127.0.0.1:")[1].split()[0])
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/traces", data=traces_request([pb_span(1, 1)]),
                                     headers={"Content-Type": "application/x-protobuf",
                                              "Authorization": f"Bearer {token}"})
        assert urllib.request.urlopen(req, timeout=30).status == 200
    finally:
        stop(proc)
    assert Store(url).trace_counts("shop")["spans"] == 1
