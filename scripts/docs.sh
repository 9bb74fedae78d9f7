#!/usr/bin/env bash
# Serve the documentation site on http://127.0.0.1:8000 (MkDocs with the Material theme, from the dev extras),
# rebuilt as the pages change. `bash scripts/docs.sh build` writes it to site/ with the strict checks CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/mkdocs ] || bash scripts/setup.sh --dev
if [ "${1:-}" = "build" ]; then
  exec .venv/bin/mkdocs build --strict
fi
exec .venv/bin/mkdocs serve --strict --dev-addr 127.0.0.1:8000 "$@"
