#!/usr/bin/env bash
# Install what is missing (dev extras and Chromium included), then run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
exec .venv/bin/python -m pytest -q "$@"
