"""scripts/setup.sh waits for a held apt/dpkg lock instead of failing.

The script runs for real (bash, from a copy of the repo layout) with a stand-in ``apt-get`` that
behaves as apt does about its lock: it takes an flock on a lock file, waiting up to
``DPkg::Lock::Timeout`` seconds (0 without the option), else fails with "Could not get lock"
(exit 100). The test holds that lock and lets go after a moment.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.no_store  # opens no store: deselected in the PostgreSQL pass

FAKE_APT = """#!/bin/bash
echo "$*" >> "$APT_LOG"
timeout=0
for a in "$@"; do case "$a" in [Dd][Pp]kg::Lock::Timeout=*) timeout="${a#*=}";; esac; done
exec 9>"$APT_LOCK"
if ! flock -w "$timeout" 9; then echo "E: Could not get lock $APT_LOCK. It is held by another process" >&2; exit 100; fi
"""
TOOLS = ("bash", "dirname", "id", "cat", "sha256sum", "cut", "touch", "flock", "env")


@pytest.mark.skipif(not all(shutil.which(t) for t in TOOLS), reason="needs bash, flock and coreutils")
def test_setup_waits_for_a_held_apt_lock(tmp_path):
    repo, fakebin = tmp_path / "repo", tmp_path / "bin"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", repo / "scripts" / "setup.sh")
    for req in ("requirements.txt", "requirements-dev.txt"):
        (repo / req).write_text("")
    venv_python = repo / ".venv" / "bin" / "python"  # an existing venv whose pip has nothing to do
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text("#!/bin/bash\nexit 0\n")
    fakebin.mkdir()
    for tool in TOOLS:
        os.symlink(shutil.which(tool), fakebin / tool)
    (fakebin / "apt-get").write_text(FAKE_APT)
    (fakebin / "sudo").write_text('#!/bin/bash\nexec "$@"\n')
    for f in ("apt-get", "sudo", ):
        (fakebin / f).chmod(0o755)
    venv_python.chmod(0o755)
    lock, log = tmp_path / "lock-frontend", tmp_path / "apt.log"
    env = {"PATH": str(fakebin), "APT_LOCK": str(lock), "APT_LOG": str(log), "APT_LOCK_TIMEOUT": "30",
           "HOME": str(tmp_path)}

    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another install holds the lock...
        timer = threading.Timer(1.5, fcntl.flock, (held, fcntl.LOCK_UN))  # ...and finishes a moment later
        timer.start()
        # --dev with no chromium on PATH: the script has system packages to install
        proc = subprocess.run(["bash", "scripts/setup.sh", "--dev"], cwd=repo, env=env, capture_output=True,
                              text=True, timeout=60)
        timer.join()
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    assert [c.split()[2] for c in calls] == ["update", "install"] and "chromium" in calls[1]
    assert "Could not get lock" not in proc.stderr
