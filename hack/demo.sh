#!/usr/bin/env bash
# The README's first command: Ptah's main job on an embedded default, installed as users
# install it.
#   bash hack/demo.sh          # set up, run, show status; leaves the dev cluster running
#   bash hack/demo.sh --down   # stop the demo cluster and undo its host changes
# It starts a local cluster with a real node (kubelet on containerd and runc; binaries
# built from Go modules, cached under ~/.cache/ptah), builds the image from the
# Dockerfile (buildah, cached layers) and loads it into the node, installs the Helm chart
# (two operator Pods, one leading), applies a sample PtahSchema (examples/shop-schema.sql)
# to a SQLite database on a volume the runner Pods mount, waits for Ready and shows the
# status, the plan, and the tables in the database.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export PTAH_CACHE=${PTAH_CACHE:-$HOME/.cache/ptah}
demo="$PTAH_CACHE/demo"
data="$demo/data"
ns=ptah-demo
system=ptah-system

if [[ "${1:-}" == "--down" ]]; then
  .venv/bin/ptah dev down --name demo
  exit 0
fi

say() { printf '\n==> %s\n' "$*"; }
t0=$SECONDS

say "setting up (Python packages, binaries, node packages, images, helm; fast when cached)"
bash hack/setup.sh
bash hack/controlplane/build.sh >/dev/null
bash hack/node.sh --packages >/dev/null
bash hack/tools.sh
. .venv/bin/activate
helm="$(bash hack/tools.sh --print-dir)/helm"
kubectl="$(bash hack/controlplane/build.sh --print-dir)/kubectl"
# The runner runs as uid 10001 (the image's USER): the database directory is its to write.
mkdir -p "$data"
chmod 0755 "$demo"
chmod 0777 "$data"

say "starting the local cluster with a real node"
ptah dev up --name demo --node real
export KUBECONFIG="$PTAH_CACHE/dev/demo/kubeconfig"

say "building the image from the Dockerfile and loading it into the node"
ptah dev images --name demo

say "installing the chart (helm upgrade --install ptah deploy/helm/ptah)"
"$kubectl" create namespace "$ns" --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
"$helm" upgrade --install ptah deploy/helm/ptah --namespace "$system" --create-namespace \
  --set image.tag=dev --set "watch.namespaces={$ns}" --set operator.pollSeconds=1 \
  --set-json "runner.volumes=[{\"name\":\"data\",\"hostPath\":{\"path\":\"$data\",\"type\":\"Directory\"}}]" \
  --set-json 'runner.volumeMounts=[{"name":"data","mountPath":"/data"}]' \
  --wait --timeout 180s >/dev/null
"$kubectl" -n "$system" get pods -o wide

say "starting from a fresh sample database (a previous run's tour edits are undone)"
# The tour edits the schema and the database; the demo shows the sample, so a second run
# deletes its PtahSchema (its plans go with it) and the database before applying again.
"$kubectl" -n "$ns" delete ptahschema shop --ignore-not-found --wait --timeout=120s >/dev/null ||
  echo "the previous demo PtahSchema is still being deleted; going on" >&2
rm -f "$data/shop.db" "$data/shop.db-journal" "$data/shop.db-wal" "$data/shop.db-shm"

say "applying the sample schema to sqlite:////data/shop.db (runner Pods mount $data at /data)"
"$kubectl" -n "$ns" create secret generic shop-db --from-literal=url="sqlite:////data/shop.db" \
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
ready=""
for _ in $(seq 1 180); do
  ready=$("$kubectl" -n "$ns" get ptahschema shop \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)
  [[ "$ready" == "True" ]] && break
  sleep 1
done

say "status"
ptah status -n "$ns"
"$kubectl" -n "$ns" get ptahschemas,ptahplans
"$kubectl" -n "$ns" get jobs
say "tables now in $data/shop.db"
python - "$data/shop.db" <<'PY'
import sqlite3, sys
with sqlite3.connect(sys.argv[1]) as db:
    for (sql,) in db.execute("SELECT sql FROM sqlite_master WHERE type IN ('table','index') AND sql IS NOT NULL ORDER BY name"):
        print(sql + ";")
PY
if [[ "$ready" != "True" ]]; then
  echo "the schema did not become Ready; see: $kubectl -n $system logs deploy/ptah" >&2
  exit 1
fi
echo "(demo ready in $((SECONDS - t0))s)"
cat <<MSG

Ptah applied the schema. Try next (after \`. .venv/bin/activate\`):
  export KUBECONFIG=$KUBECONFIG
  export PATH=$(dirname "$kubectl"):\$PATH
  kubectl -n $ns edit configmap shop-schema        # change the desired schema
  ptah status -n $ns                                 # watch it plan and apply
  ptah approve schema/shop -n $ns                    # when a destructive plan waits
  kubectl -n $system logs deploy/ptah                # the operator's log (JSON lines)
  bash hack/demo.sh --down                           # stop the demo cluster
MSG
