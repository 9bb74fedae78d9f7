#!/usr/bin/env bash
# Install what is missing (dev extras and Chromium included), then run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
# The engine's layers and the size limits (ARCHITECTURE.md) first: a few seconds, and a broken one fails CI.
.venv/bin/lint-imports --no-cache
.venv/bin/python scripts/check_sizes.py
# The documentation site, with MkDocs' strict checks (a broken link or anchor fails it): about 2 s. Never --quiet,
# which hides the warnings --strict counts.
.venv/bin/mkdocs build --strict --site-dir "${TMPDIR:-/tmp}/evals-docs-$$" && rm -rf "${TMPDIR:-/tmp}/evals-docs-$$"
# PyRIT (the converters the SDK's attack strategies map to) in a throwaway virtualenv of its own (never ours), for
# tests/test_redteam_pyrit.py: about 50 s once, in the background beside the SDK's install below. Without PyPI
# those tests skip and say so.
pyrit_pid=""
if ! bench/.pyrit-venv/bin/python -c "import pyrit.converter" 2>/dev/null; then
  { { .venv/bin/python -m venv --clear bench/.pyrit-venv && bench/.pyrit-venv/bin/python -m pip install -q "pyrit==1.1.*"; } \
    || { echo "could not install PyRIT into bench/.pyrit-venv: its comparison tests will skip"; rm -rf bench/.pyrit-venv; }; } &
  pyrit_pid=$!
fi
# The Azure AI Evaluation SDK in a throwaway virtualenv (never in ours), for the tests that compare the requests
# its own .prompty evaluators send with ours (tests/test_sdk_prompty.py); about 40 s once. Without PyPI those
# tests skip and say so.
if [ ! -x bench/.sdk-venv/bin/python ]; then
  { .venv/bin/python -m venv --clear bench/.sdk-venv && bench/.sdk-venv/bin/python -m pip install -q "azure-ai-evaluation==1.18.*"; } \
    || { echo "could not install the Azure SDK into bench/.sdk-venv: its comparison tests will skip"; rm -rf bench/.sdk-venv; }
fi
[ -z "$pyrit_pid" ] || wait "$pyrit_pid" || true
PYTEST=(.venv/bin/python -m pytest -q --dist loadfile --no-loadscope-reorder)  # longest files first (tests/conftest.py)
# With arguments: one pass, two workers (each takes whole test files, so a module's dashboard server starts
# once); e.g. `bash scripts/test.sh -n 0 tests/test_store.py`, or `--store postgresql` for the PostgreSQL pass.
if [ $# -gt 0 ]; then
  exec "${PYTEST[@]}" -n 2 "$@"
fi
# Without: the whole suite on SQLite and, at the same time, on PostgreSQL: every test that opens a store again,
# each with a fresh database of a throw-away server (tests/pg.py), the 36 that drive Chromium included. Side by
# side the two passes fill each other's waits (judge latencies, retries, servers starting) on the 2 cores, which
# keeps CI inside its 20 minutes (figures in bench/RESULTS.md). The PostgreSQL pass's report follows the SQLite one's.
# The two tests that measure a judged run's rate against a rate-limited server (marked timing, each on its own
# SQLite file) run first, alone, on a quiet machine.
status=0
echo "== rates measured against a rate-limited judge, alone"
"${PYTEST[@]}" -n 0 -m timing || status=1
mkdir -p artifacts
PG_LOG=artifacts/pytest-postgresql.log
"${PYTEST[@]}" -n 2 --store postgresql -m "not timing" -p no:cacheprovider \
  --basetemp="${TMPDIR:-/tmp}/evals-pg-pass-$$" >"$PG_LOG" 2>&1 &
pg_pid=$!
echo "== the whole suite on SQLite"
"${PYTEST[@]}" -n 2 --no-pg-copies -m "not timing" || status=1
wait "$pg_pid" || status=1
rm -rf "${TMPDIR:-/tmp}/evals-pg-pass-$$"
echo "== the suite on PostgreSQL (tests that open a store; $PG_LOG)"
tail -n 60 "$PG_LOG"
exit $status
