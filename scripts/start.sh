#!/usr/bin/env bash
# Install what is missing, then open the dashboard (SQLite + bundled samples; no key needed to look around), and
# beside it the monitor's OTLP/HTTP receiver on 127.0.0.1:4318 (EVAL_MONITOR=0 leaves it off; EVAL_MONITOR_PORT
# moves it), so an app instrumented as the docs' Monitoring page (docs/monitoring.md) says sends its traces here; its rules are judged
# every minute (EVAL_MONITOR_JUDGE_EVERY: seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
dashboard=(.venv/bin/python -m streamlit run app.py --server.headless true --browser.gatherUsageStats false "$@")
if [ "${EVAL_MONITOR:-1}" = "0" ]; then
  exec "${dashboard[@]}"
fi
.venv/bin/python -m evaluators monitor serve --host 127.0.0.1 --port "${EVAL_MONITOR_PORT:-4318}" \
  --judge-every "${EVAL_MONITOR_JUDGE_EVERY:-60}" &
receiver=$!
"${dashboard[@]}" &
app=$!
# Ctrl-C or a TERM stops both (background jobs of a script ignore SIGINT, so it is passed on as TERM); the receiver
# answers the requests it has taken before it ends.
trap 'kill -TERM "$app" "$receiver" 2>/dev/null || true' INT TERM
trap 'kill -TERM "$receiver" 2>/dev/null || true' EXIT
status=0
wait "$app" || status=$?
exit "$status"
