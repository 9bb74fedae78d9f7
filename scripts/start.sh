#!/usr/bin/env bash
# Install what is missing, then open the dashboard (SQLite + bundled samples; no key needed to look around).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m streamlit run app.py --server.headless true --browser.gatherUsageStats false "$@"
