#!/usr/bin/env bash
# The README's first command: Ptah's main job on an embedded default.
#   bash hack/demo.sh          # set up, run, show status; leaves the dev cluster running
#   bash hack/demo.sh --down   # stop the demo cluster
# It starts a local control plane (built from Go modules, cached under ~/.cache/ptah),
# installs the CRDs, starts the operator as a local process, applies a sample PtahSchema
# (examples/shop-schema.sql) to a SQLite database, waits for Ready and shows the status,
# the plan, and the tables in the database.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export PTAH_CACHE=${PTAH_CACHE:-$HOME/.cache/ptah}
demo="$PTAH_CACHE/demo"
ns=ptah-demo

if [[ "${1:-}" == "--down" ]]; then
  [[ -f "$demo/operator.pid" ]] && kill "$(cat "$demo/operator.pid")" 2>/dev/null || true
  .venv/bin/ptah dev down --name demo
  exit 0
fi

say() { printf '\n==> %s\n' "$*"; }

say "setting up (Python packages, control plane binaries; fast when cached)"
bash hack/setup.sh
bash hack/controlplane/build.sh >/dev/null
. .venv/bin/activate
mkdir -p "$demo"

say "starting the local control plane"
ptah dev up --name demo
export KUBECONFIG="$PTAH_CACHE/dev/demo/kubeconfig"
kubectl="$(bash hack/controlplane/build.sh --print-dir)/kubectl"

say "installing the CRDs"
"$kubectl" apply --server-side --force-conflicts -f deploy/crds >/dev/null
for crd in ptahschemas ptahmigrations ptahplans ptahapprovals; do
  "$kubectl" wait --for=condition=Established "crd/$crd.ptah.io" --timeout=60s >/dev/null
done
"$kubectl" create namespace "$ns" --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null

say "starting the operator (log: $demo/operator.log)"
if [[ -f "$demo/operator.pid" ]] && kill -0 "$(cat "$demo/operator.pid")" 2>/dev/null; then
  echo "already running (pid $(cat "$demo/operator.pid"))"
else
  nohup ptah operator run --kubeconfig "$KUBECONFIG" --lock-namespace "$ns" \
    --metrics-port 0 --health-port 0 --poll-seconds 1 >"$demo/operator.log" 2>&1 &
  echo $! >"$demo/operator.pid"
fi

say "applying the sample schema to sqlite:///$demo/shop.db"
"$kubectl" -n "$ns" create secret generic shop-db --from-literal=url="sqlite:///$demo/shop.db" \
  --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
"$kubectl" -n "$ns" create configmap shop-schema --from-file=schema.sql=examples/shop-schema.sql \
  --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
"$kubectl" -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: ptah.io/v1alpha1
kind: PtahSchema
metadata:
  name: shop
spec:
  target:
    engine: sqlite
    secretRef: {name: shop-db, key: url}
  source:
    configMapKeyRef: {name: shop-schema, key: schema.sql}
  policy:
    approval: Destructive
YAML

say "waiting for the schema to be Ready"
for _ in $(seq 1 120); do
  ready=$("$kubectl" -n "$ns" get ptahschema shop \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)
  [[ "$ready" == "True" ]] && break
  sleep 1
done

say "status"
ptah status -n "$ns"
"$kubectl" -n "$ns" get ptahschemas,ptahplans
say "tables now in $demo/shop.db"
python - "$demo/shop.db" <<'PY'
import sqlite3, sys
with sqlite3.connect(sys.argv[1]) as db:
    for (sql,) in db.execute("SELECT sql FROM sqlite_master WHERE type IN ('table','index') AND sql IS NOT NULL ORDER BY name"):
        print(sql + ";")
PY
if [[ "$ready" != "True" ]]; then
  echo "the schema did not become Ready; see $demo/operator.log" >&2
  exit 1
fi
cat <<MSG

Ptah applied the schema. Try next (after `. .venv/bin/activate`):
  export KUBECONFIG=$KUBECONFIG
  $kubectl -n $ns edit configmap shop-schema        # change the desired schema
  ptah status -n $ns                                 # watch it plan and apply
  ptah approve schema/shop -n $ns                    # when a destructive plan waits
  bash hack/demo.sh --down                           # stop the demo cluster
MSG
