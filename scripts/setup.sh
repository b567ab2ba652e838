#!/usr/bin/env bash
# Install everything this project needs, from scratch, idempotently:
#   Python packages (numpy pinned to 2.0.x, the version Pyodide 0.27.7 ships),
#   PyTorch 2.13.0 CPU (cross-check tests), Debian chromium (browser tests),
#   and the Pyodide 0.27.7 runtime cache (scripts/fetch_runtime.py, sha256-verified).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
$PY -m pip install --quiet --disable-pip-version-check "numpy==2.0.2" -e '.[build,test]'
$PY -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
if ! command -v /usr/bin/chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "setup: /usr/bin/chromium is missing; install Debian's chromium (apt-get install chromium)" >&2
  fi
fi
if ! command -v npm >/dev/null 2>&1; then   # fetch_runtime.py uses `npm pack pyodide@0.27.7`
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
  else
    echo "setup: npm is missing; install Node.js/npm (apt-get install npm)" >&2
  fi
fi
if [ -f scripts/fetch_runtime.py ]; then
  $PY scripts/fetch_runtime.py
fi
if [ -f scripts/fetch_axe.py ]; then      # axe-core for the accessibility tests (npm, sha512-pinned)
  $PY scripts/fetch_axe.py
fi
