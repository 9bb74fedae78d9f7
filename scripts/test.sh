#!/usr/bin/env bash
# Install what is missing (dev extras and Chromium included), then run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
# The engine's layers and the size limits (ARCHITECTURE.md) first: a few seconds, and a broken one fails CI.
.venv/bin/lint-imports --no-cache
.venv/bin/python scripts/check_sizes.py
# The Azure AI Evaluation SDK in a throwaway virtualenv (never in ours), for the tests that compare the requests
# its own .prompty evaluators send with ours (tests/test_sdk_prompty.py); about 40 s once. Without PyPI those
# tests skip and say so.
if [ ! -x bench/.sdk-venv/bin/python ]; then
  { .venv/bin/python -m venv --clear bench/.sdk-venv && bench/.sdk-venv/bin/python -m pip install -q "azure-ai-evaluation==1.18.*"; } \
    || { echo "could not install the Azure SDK into bench/.sdk-venv: its comparison tests will skip"; rm -rf bench/.sdk-venv; }
fi
# Two workers, one per core, each taking whole test files (module fixtures such as a dashboard server start
# once), which keeps CI inside its 20-minute limit (figures in the closing notes). `bash scripts/test.sh -n 0` runs serially.
exec .venv/bin/python -m pytest -q -n 2 --dist loadfile "$@"
