#!/usr/bin/env bash
# Install what is missing (dev extras and Chromium included), then run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
# The engine's layers and the size limits (ARCHITECTURE.md) first: a few seconds, and a broken one fails CI.
.venv/bin/lint-imports --no-cache
.venv/bin/python scripts/check_sizes.py
exec .venv/bin/python -m pytest -q "$@"
