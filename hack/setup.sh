#!/usr/bin/env bash
# Install what Ptah needs on a fresh machine; fast when already done.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export PTAH_CACHE=${PTAH_CACHE:-$HOME/.cache/ptah}
mkdir -p "$PTAH_CACHE"
if [ ! -x .venv/bin/python ]; then
  python3.11 -m venv .venv 2>/dev/null || python3 -m venv .venv
fi
stamp=.venv/.ptah-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip==26.3
  .venv/bin/pip install -q -e '.[dev]'
  touch "$stamp"
fi
