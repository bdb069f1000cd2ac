#!/usr/bin/env bash
# The README's test command: set up everything the tests need on this machine (a fresh
# Debian machine as root, or a warm one in seconds), then run them all.
#   bash hack/test.sh [pytest args...]
# Steps: Python venv and pinned packages; the control plane and the real node's kubelet
# and kube-scheduler built from Go modules (cached under ~/.cache/ptah); PostgreSQL 15
# and MariaDB 10.11 on loopback; the real node's Debian packages and images (buildah,
# cached layers); lint and types; the fault-injecting simulation; then pytest over unit,
# simulation, engine, migration, integration and end-to-end tests. Nothing is skipped
# when CI=true. Each step prints its time (a cold machine's setup is the long part).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export PTAH_CACHE=${PTAH_CACHE:-$HOME/.cache/ptah}
SIM_SCHEDULES=${PTAH_SIM_SCHEDULES:-2000}

last=""
t_step=$SECONDS
t_all=$SECONDS
took() { [ -n "$last" ] && printf '<== %s: %ss\n' "$last" "$((SECONDS - t_step))"; true; }
step() { took; last="$*"; t_step=$SECONDS; printf '\n==> %s\n' "$*"; }

step "python environment"
bash hack/setup.sh
step "control plane and node binaries"
bash hack/controlplane/build.sh
step "databases"
bash hack/databases.sh
step "tools (helm)"
bash hack/tools.sh
step "real node: Debian packages and images"
bash hack/node.sh
. .venv/bin/activate

step "ruff"
ruff check src tests bench
step "mypy --strict"
mypy
gate=(python -m ptah.testing.sim --schedules "$SIM_SCHEDULES" --seed 0 --min-window-count 20)
gate_title="simulation: $SIM_SCHEDULES fault schedules (each contract window reached by a stop >= 20 times)"
# The part of the mutation suite that fits CI: every mutant of tests/mutants against the
# simulation (its last killing schedule first, then the 2000-schedule sweep if that one
# no longer kills). The whole suite, pytest killer included: bash hack/mutation.sh
# (PTAH_MUTATION=full here; =off skips it).
mutation=${PTAH_MUTATION:-sim}
mutation_args=(--stages sim)
[ "$mutation" = "full" ] && mutation_args=()
if [ "$#" -gt 0 ]; then
  step "$gate_title"
  "${gate[@]}"
  if [ "$mutation" != "off" ]; then
    step "mutation suite: every mutant (${mutation_args[*]:-simulation and pytest killers})"
    bash hack/mutation.sh "${mutation_args[@]}"
  fi
  printf '(setup, lint and simulation took %ss in all)\n' "$((SECONDS - t_all))"
  step "pytest $*"
  pytest "$@"
  exit
fi
printf '(setup and lint took %ss in all)\n' "$((SECONDS - t_all))"
# Without arguments: every test, in two runs that share one real node (started by the
# first test that needs it, stopped here at the end). Most of the time goes to the
# end-to-end tests waiting on the apiserver, the kubelet and the holds, so the second
# run takes two tests at a time (pytest-xdist, one module per worker). The tests
# marked node_exclusive disturb the node or the host, so they run first, alone.
# The simulation gate and the mutation suite run beside both runs: the tests mostly wait
# on the kubelet and the apiserver, and the two are CPU only and deterministic (fixed
# seeds, niced so the waiting tests keep their share), so neither changes the other's
# result. Their output is printed once the tests are done.
PTAH_TEST_REAL_STATE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ptah-test-node.XXXXXX")
export PTAH_TEST_REAL_STATE_DIR
stop_node() { ptah dev down --state-dir "$PTAH_TEST_REAL_STATE_DIR" --purge >/dev/null 2>&1 || true; }
trap stop_node EXIT
rc=0
beside_log=$(mktemp "${TMPDIR:-/tmp}/ptah-simulation.XXXXXX")
pytest_log=$(mktemp "${TMPDIR:-/tmp}/ptah-pytest.XXXXXX")
step "$gate_title; then the mutation suite (${mutation_args[*]:-simulation and pytest killers}); beside the tests"
t_beside=$SECONDS
(
  t=$SECONDS
  grc=0
  nice -n 10 "${gate[@]}" || grc=$?
  printf 'simulation gate: exit %s after %ss\n' "$grc" "$((SECONDS - t))"
  mrc=0
  if [ "$mutation" != "off" ]; then
    t=$SECONDS
    nice -n 10 bash hack/mutation.sh "${mutation_args[@]}" || mrc=$?
    printf 'mutation suite: exit %s after %ss\n' "$mrc" "$((SECONDS - t))"
  fi
  [ "$grc" -eq 0 ] && [ "$mrc" -eq 0 ]
) >"$beside_log" 2>&1 &
beside_pid=$!
step "pytest: the node_exclusive tests, one at a time"
pytest -m node_exclusive --durations=10 || rc=$?
step "pytest: every other test, two at a time"
prc=0
pytest -m "not node_exclusive" -n 2 --dist loadfile --durations=30 2>&1 | tee "$pytest_log" || prc=$?
[ "$prc" -eq 0 ] || rc=$prc
step "simulation gate and mutation suite: their output (they ran beside the tests above)"
brc=0
wait "$beside_pid" || brc=$?
cat "$beside_log"
printf 'simulation gate and mutation suite: exit %s after %ss\n' "$brc" "$((SECONDS - t_beside))"
[ "$brc" -eq 0 ] || rc=$brc
took
# pytest's summary stays the last line (CI reads it).
tail -n 1 "$pytest_log"
exit "$rc"
