#!/usr/bin/env bash
# Shared set-up for run.sh and test.sh: a .venv with iobench installed (editable), torch
# pinned to the CPU build first when absent, and fio (and, for tests, chromium) via apt-get
# when missing and running as root. Re-running is cheap: a stamp skips pip when nothing changed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
EXTRAS="${1:-plot}"
VENV="$ROOT/.venv"
PY="${PYTHON:-python3}"

log() { printf '[setup] %s\n' "$*" >&2; }

apt_install() {
  # apt-get only as root, only for what is missing; failures are reported, not fatal.
  local missing=()
  for pkg in "$@"; do
    case "$pkg" in
      fio) command -v fio >/dev/null 2>&1 || missing+=(fio) ;;
      chromium) command -v chromium >/dev/null 2>&1 || missing+=(chromium) ;;
    esac
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    log "missing ${missing[*]} (not root: install with apt-get install ${missing[*]})"
    return 0
  fi
  log "apt-get install ${missing[*]}"
  if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >/dev/null 2>&1; then
    log "apt-get install ${missing[*]} failed: tests that need them will skip"
  fi
}

if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"

stamp="$VENV/.iobench-setup"
want="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)-$EXTRAS"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  if ! "$VPY" -c "import torch" >/dev/null 2>&1; then
    # An unpinned torch would pull a multi-GB CUDA build; the pinned CPU build is local.
    log "installing torch==2.13.0 (CPU build)"
    "$VPY" -m pip install -q torch==2.13.0
  fi
  log "installing iobench[$EXTRAS]"
  "$VPY" -m pip install -q -e "$ROOT[$EXTRAS]"
  echo "$want" > "$stamp"
fi

apt_install fio
if [[ "$EXTRAS" == *test* ]]; then
  apt_install chromium
fi
