#!/usr/bin/env bash
# Set up a fresh machine: system packages (WordNet; Chromium and PostgreSQL with --dev), a virtualenv, Python packages.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
dev=0; [ "${1:-}" = "--dev" ] && dev=1

apt_pkgs=()
[ -f /usr/share/wordnet/index.sense ] || apt_pkgs+=(wordnet-base wordnet-sense-index)
if [ $dev = 1 ] && ! command -v chromium >/dev/null; then apt_pkgs+=(chromium chromium-driver); fi
if [ ${#apt_pkgs[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    # Wait (up to 10 min) for an apt/dpkg lock held by another install or unattended-upgrades
    # instead of failing at once with "Could not get lock".
    apt=(apt-get -o DPkg::Lock::Timeout="${APT_LOCK_TIMEOUT:-600}")
    echo "installing system packages: ${apt_pkgs[*]}"
    $SUDO "${apt[@]}" update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends "${apt_pkgs[@]}" >/dev/null
  else
    echo "warning: no apt-get; install WordNet 3.0 (for METEOR) and Chromium (for browser tests) yourself" >&2
  fi
fi
# Debian's PostgreSQL server for the store tests' PostgreSQL half (tests/pg.py starts its own throw-away
# cluster; the package's own service is not used). Best effort: without it those tests skip, saying why.
if [ $dev = 1 ] && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  if command -v apt-get >/dev/null; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    apt=(apt-get -o DPkg::Lock::Timeout="${APT_LOCK_TIMEOUT:-600}")
    echo "installing system packages: postgresql"
    { $SUDO "${apt[@]}" update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq \
        --no-install-recommends postgresql >/dev/null; } \
      || echo "warning: postgresql could not be installed; the store tests' PostgreSQL half will be skipped" >&2
  else
    echo "warning: no apt-get; install PostgreSQL (Debian's postgresql) to run the store tests on PostgreSQL" >&2
  fi
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
req=requirements.txt; [ $dev = 1 ] && req=requirements-dev.txt
stamp=".venv/.installed-$(cat requirements.txt requirements-dev.txt | sha256sum | cut -c1-12)-$dev"
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -r "$req"
  touch "$stamp"
fi
