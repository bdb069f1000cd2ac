#!/usr/bin/env bash
# The README's test command: set up everything the tests need on this machine (a fresh
# Debian machine as root, or a warm one in seconds), then run them all.
#   bash hack/test.sh [pytest args...]
# Steps: Python venv and pinned packages; the control plane built from Go modules
# (cached under ~/.cache/ptah); PostgreSQL 15 and MariaDB 10.11 on loopback; lint and
# types; the fault-injecting simulation; then pytest over unit, simulation, engine,
# migration, integration and end-to-end tests. Nothing is skipped when CI=true.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export PTAH_CACHE=${PTAH_CACHE:-$HOME/.cache/ptah}
SIM_SCHEDULES=${PTAH_SIM_SCHEDULES:-2000}

step() { printf '\n==> %s\n' "$*"; }

step "python environment"
bash hack/setup.sh
step "control plane binaries"
bash hack/controlplane/build.sh
step "databases"
bash hack/databases.sh
step "tools (helm)"
bash hack/tools.sh
. .venv/bin/activate

step "ruff"
ruff check src tests bench
step "mypy --strict"
mypy
step "simulation: $SIM_SCHEDULES fault schedules"
python -m ptah.sim --schedules "$SIM_SCHEDULES" --seed 0
step "pytest"
pytest "$@"
