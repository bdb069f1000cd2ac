#!/usr/bin/env bash
# Set up everything the tests need on this machine, then run them.
# Usage: bash hack/test.sh [pytest args...]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash hack/setup.sh
. .venv/bin/activate
ruff check src tests bench
mypy
pytest "$@"
