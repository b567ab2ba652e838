#!/usr/bin/env bash
# Install what this project needs, idempotently (a second run downloads nothing).
#
#   bash scripts/setup.sh          what `python3 build.py` needs: numpy (pinned to 2.0.2, the version
#                                  Pyodide 0.27.7 ships), jinja2, markdown, latex2mathml, pygments,
#                                  fontTools + brotli (math font subset, WOFF2), resvg-py (link-preview
#                                  images), and the fonts those images are drawn with (Debian:
#                                  fonts-dejavu-core, fonts-noto-cjk)
#   bash scripts/setup.sh --test   all of the above, plus what the tests and benchmarks need: pytest,
#                                  pytest-xdist (3.8.0), hypothesis, playwright, actionlint; PyTorch 2.13.0 CPU; Debian's
#                                  chromium and npm; the Pyodide 0.27.7 runtime cache and axe-core
#                                  (sha-verified, ~/.cache/tp-explained/); Lighthouse 12 (npm ci from
#                                  benchmarks/lighthouse/package-lock.json into the same cache)
#
# Python packages go to whatever `python3` is (set PYTHON=… for another), so inside a virtual
# environment they stay in it:  python3 -m venv .venv && . .venv/bin/activate
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
MODE=build
case "${1:-}" in
  "") ;;
  --test) MODE=test ;;
  *) echo "usage: bash scripts/setup.sh [--test]" >&2; exit 2 ;;
esac
PIP=("$PY" -m pip install --quiet --disable-pip-version-check)
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/tp-explained"
APT_UPDATED=

# Debian packages: installed when missing and we are root; otherwise say what to install.
apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    if [ -z "$APT_UPDATED" ]; then apt-get update -qq; APT_UPDATED=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: please install the Debian/Ubuntu packages: ${missing[*]}" >&2
  fi
}

# True when tpmath (this checkout) and every requirement of the given extras are installed at an
# allowed version: then pip is not run at all (it would query the index and rebuild the editable
# wheel). Only == and >= occur in pyproject.toml; anything else makes it answer "no".
satisfied() {
  "$PY" - "$@" <<'PYEOF'
import re, sys, tomllib
from importlib import metadata
from pathlib import Path

def ver(v):
    return tuple(int(x) for x in re.findall(r"\d+", v.split("+")[0])[:3])

project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
reqs = list(project["dependencies"]) + ["numpy==2.0.2"]
for extra in sys.argv[1:]:
    reqs += project["optional-dependencies"][extra]
try:
    direct = metadata.distribution("tpmath").read_text("direct_url.json") or ""
    if Path.cwd().as_uri() not in direct:
        sys.exit(1)
    for req in reqs:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(==|>=)\s*([\w.]+)", req.split(";")[0].strip())
        have = ver(metadata.version(m.group(1)))
        if (m.group(2) == "==" and have != ver(m.group(3))) or have < ver(m.group(3)):
            sys.exit(1)
except (metadata.PackageNotFoundError, AttributeError):
    sys.exit(1)
PYEOF
}

# ---- the build
satisfied build || "${PIP[@]}" "numpy==2.0.2" -e '.[build]'
if ! PYTHONPATH=src "$PY" -c "import sys, tpsite.preview as p; sys.exit(p.font_files() is None)"; then
  apt_install fonts-dejavu-core fonts-noto-cjk
fi
[ "$MODE" = build ] && exit 0

# ---- the tests and benchmarks
satisfied build test torch || "${PIP[@]}" "numpy==2.0.2" -e '.[build,test,torch]'
[ -x /usr/bin/chromium ] || apt_install chromium
command -v npm >/dev/null 2>&1 || apt_install npm     # fetch_runtime.py / fetch_axe.py use `npm pack`
"$PY" scripts/fetch_runtime.py
"$PY" scripts/fetch_axe.py
LH="$CACHE/lighthouse-12.2.3"
if ! { [ -f "$LH/node_modules/lighthouse/cli/index.js" ] &&
       cmp -s benchmarks/lighthouse/package-lock.json "$LH/package-lock.json"; }; then
  mkdir -p "$LH"
  cp benchmarks/lighthouse/package.json benchmarks/lighthouse/package-lock.json "$LH/"
  (cd "$LH" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
