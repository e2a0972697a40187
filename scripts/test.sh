#!/usr/bin/env bash
# Set everything up (with the test extras), then ruff and the whole pytest suite.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh test
VENV="$ROOT/.venv"
echo "== ruff"
"$VENV/bin/ruff" check iobench tests scripts
"$VENV/bin/ruff" format --check iobench tests scripts
echo "== pytest"
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
