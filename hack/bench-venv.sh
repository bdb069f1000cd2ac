#!/usr/bin/env bash
# The reference bench/plan.py measures Ptah against: migra and schemainspect, with the
# SQLAlchemy 1.4 and psycopg2 they run on, in a virtualenv of their own (they are not
# Ptah's dependencies and pin an older SQLAlchemy), at ${PTAH_CACHE:-~/.cache/ptah}/bench-venv.
#   bash hack/bench-venv.sh               # create or reuse it; warm: well under a second
#   bash hack/bench-venv.sh --print-python
# bench/plan.py runs this itself when MIGRA_PYTHON is not set, and uses what it prints.
set -euo pipefail
export PTAH_CACHE=${PTAH_CACHE:-$HOME/.cache/ptah}
venv=$PTAH_CACHE/bench-venv
# Pinned: the figures are ratios to this reference, so it does not move under them.
pins=(migra==3.0.1663481299 schemainspect==3.1.1663587362 sqlbag==0.1.1617247075
  SQLAlchemy==1.4.54 greenlet==3.5.6 psycopg2-binary==2.9.13 packaging==26.4 six==1.17.0)
stamp=$venv/.ptah-pins
want=$(printf '%s\n' "${pins[@]}")
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "hack/bench-venv.sh: installing the migra reference into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "${pins[@]}" >&2
  "$venv/bin/python" -c 'import migra, schemainspect, sqlalchemy, psycopg2' >&2
  echo "$want" >"$stamp"
fi
if [[ "${1:-}" == "--print-python" ]]; then
  echo "$venv/bin/python"
fi
