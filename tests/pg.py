"""A real PostgreSQL server for the tests: Debian's ``postgresql`` binaries, a cluster made in a temporary
folder, listening on 127.0.0.1 at a free port, gone when the session ends. Each test gets a database of its own,
dropped when the test ends (:meth:`PostgresServer.drop_since`): a suite makes hundreds, ~8 MB each.

The cluster lives in ``/dev/shm`` when that is a memory file system with 4 GB free (it is thrown away, and on
disk a suite's databases were gigabytes of writes, and their removal took 30-45 s at the end of the run).

initdb refuses to run as root (CI and these machines run as root), so there the cluster belongs to the
``postgres`` user the Debian package creates (else ``nobody``), and only its server runs as that user.
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

BIN_GLOB = "/usr/lib/postgresql/*/bin"
SHM = Path("/dev/shm")


def _cluster_parent() -> str | None:
    """Where the cluster's folder goes: /dev/shm with room, else the system's temporary folder (None)."""
    try:
        st = os.statvfs(SHM)
        return str(SHM) if os.access(SHM, os.W_OK) and st.f_bavail * st.f_frsize > 4 * 2**30 else None
    except OSError:
        return None


def pg_bin() -> Path | None:
    """The newest installed PostgreSQL's bin folder (with initdb and pg_ctl), or None."""
    found = [Path(d) for d in glob.glob(BIN_GLOB) if (Path(d) / "initdb").exists() and (Path(d) / "pg_ctl").exists()]
    return max(found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0) if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """``with PostgresServer() as pg: pg.new_database()`` gives a ``postgresql+psycopg://`` URL of an empty database.
    ``durable=True`` (benches): on disk, with PostgreSQL's own fsync and synchronous commit, as a team runs it."""

    def __init__(self, durable: bool = False):
        self.durable = durable
        self.bin = pg_bin()
        if self.bin is None:
            raise RuntimeError("no PostgreSQL binaries under " + BIN_GLOB)
        self.port = _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="evals-pg-", dir=None if durable else _cluster_parent()))
        self.user = None
        if os.geteuid() == 0:
            for name in ("postgres", "nobody"):
                try:
                    self.user = pwd.getpwnam(name)
                    break
                except KeyError:
                    continue
        self._n = 0
        self._lock = threading.Lock()
        self.made: list[str] = []  # every database new_database made, in order

    def _run(self, *args: str) -> None:
        kw = {"user": self.user.pw_uid, "group": self.user.pw_gid} if self.user else {}
        subprocess.run([str(self.bin / args[0]), *args[1:]], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, cwd=self.dir, **kw)

    def __enter__(self) -> "PostgresServer":
        data = self.dir / "data"
        if self.user:
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        try:
            self._run("initdb", "-D", str(data), "-U", "evals", "--auth=trust", "--no-sync", "-E", "UTF8",
                      "--locale=C")
            # loopback only, no socket file; durability off (unless durable): a test cluster is thrown away
            opts = (f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories='' "
                    "-c max_connections=200" + ("" if self.durable else
                                                " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"))
            self._run("pg_ctl", "-D", str(data), "-o", opts, "-l", str(self.dir / "log"), "-w", "-t", "60", "start")
        except subprocess.CalledProcessError as e:
            log = (self.dir / "log").read_text() if (self.dir / "log").exists() else ""
            shutil.rmtree(self.dir, ignore_errors=True)
            raise RuntimeError(f"PostgreSQL did not start: {e.stderr.decode(errors='replace')} {log}") from None
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.dir / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://evals@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database's URL."""
        import psycopg

        with self._lock:
            self._n += 1
            name = f"t{self._n}"
            self.made.append(name)
        with psycopg.connect(self._admin, autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    @property
    def _admin(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=evals dbname=postgres"

    def drop_since(self, n: int) -> list[str]:
        """Drop the databases made after the first ``n`` (``len(made)`` when a test began), closing their
        connections (a dashboard or worker the test left running loses them); returns their URLs."""
        import psycopg

        with self._lock:
            names, self.made[n:] = self.made[n:], []
        if names:
            with psycopg.connect(self._admin, autocommit=True) as c:
                for name in names:
                    c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        return [self.url(name) for name in names]
