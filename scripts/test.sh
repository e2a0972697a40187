#!/usr/bin/env bash
# Set everything up (with the test extras), then ruff, mypy, the docs and the whole pytest suite.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh test
VENV="$ROOT/.venv"
echo "== ruff"
"$VENV/bin/ruff" check iobench tests scripts
"$VENV/bin/ruff" format --check iobench tests scripts
echo "== mypy ([tool.mypy] in pyproject.toml: 0 errors)"
"$VENV/bin/python" -m mypy
echo "== docs (mkdocs build --strict: a broken link, a missing page or a reference the code no longer matches fails)"
SITE="$(mktemp -d "${TMPDIR:-/tmp}/iobench-site.XXXXXX")"
trap 'rm -rf -- "$SITE"' EXIT
NO_MKDOCS_2_WARNING=1 "$VENV/bin/python" -m mkdocs build --strict --quiet --site-dir "$SITE"
echo "== pytest"
# tests/test_docs.py checks the site just built (DOCS_SITE_BUILT) rather than building it a
# second time; the trap removes it when pytest ends. The 25 slowest tests are listed at the end
# of the log (CI must stay under 30 minutes).
DOCS_SITE_BUILT="$SITE" "$VENV/bin/python" -m pytest -q -p no:cacheprovider --durations=25 "$@"
