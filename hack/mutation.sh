#!/usr/bin/env bash
# The mutation suite: every mutant under tests/mutants/ (one broken contract rule each)
# is applied to a scratch copy of the tree and must be killed by the simulation and by
# the fast pytest tiers (tests/unit, tests/sim). Prints a table; exits non-zero if any
# mutant survives or no longer applies.
#   bash hack/mutation.sh                 # every mutant, both killers
#   bash hack/mutation.sh NAME...         # some mutants
#   bash hack/mutation.sh --list          # what there is
# Options pass through to tests/mutants/mutate.py (--stages, --sim-schedules, --jobs...).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
if [ -z "${VIRTUAL_ENV:-}" ] && [ -f .venv/bin/activate ]; then
  . .venv/bin/activate
fi
exec python tests/mutants/mutate.py "$@"
