#!/usr/bin/env bash
# Build (or reuse) the binaries of Ptah's local control plane:
#   kube-apiserver, kube-controller-manager, kubectl  (k8s.io/kubernetes, wrapper ./k8s)
#   etcd                                             (go.etcd.io/etcd/server/v3, wrapper ./etcd)
#   kubelet, kube-scheduler                          (k8s.io/kubernetes, wrapper ./node; the
#                                                     dev cluster's real node; --no-node skips)
# Output: ${PTAH_CACHE:-~/.cache/ptah}/controlplane/<k8s-version>/bin/, keyed by the
# versions pinned in the wrapper go.mod files. A warm cache returns in well under a second.
# Usage: hack/controlplane/build.sh [--print-dir] [--force] [--no-node]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
k8s_version="$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$here/k8s/go.mod")"
etcd_version="$(awk '$1=="require" && $2=="go.etcd.io/etcd/server/v3" {print $3}' "$here/etcd/go.mod")"
cache="${PTAH_CACHE:-$HOME/.cache/ptah}"
out="$cache/controlplane/$k8s_version"
bin="$out/bin"
force=0
node=1
for arg in "$@"; do
  case "$arg" in
    --print-dir) echo "$bin"; exit 0 ;;
    --force) force=1 ;;
    --no-node) node=0 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done

# go.mod/go.sum are complete (go mod tidy over tools.go): never rewrite them in CI.
export GOFLAGS="${PTAH_GOFLAGS:--mod=readonly -buildvcs=false}"
export CGO_ENABLED=0
go="${GO:-go}"
command -v "$go" >/dev/null || go=/usr/local/go/bin/go
mkdir -p "$bin"

# stamp: the wrapper go.mod/go.sum contents, the Go version, the package and the
# ldflags. A binary is reused when its stamp matches; anything else rebuilds it.
stamp_of() { cat "$here/$1/go.mod" "$here/$1/go.sum"; "$go" env GOVERSION; echo "$2 $3"; }

build_one() { # <wrapper-dir> <package> <name> [extra ldflags]
  local dir="$1" pkg="$2" name="$3" extra="${4:-}" want have=""
  want="$(stamp_of "$dir" "$pkg" "-s -w $extra" | sha256sum | cut -d' ' -f1)"
  [[ -f "$bin/.$name.stamp" ]] && have="$(cat "$bin/.$name.stamp")"
  if [[ $force -eq 0 && -x "$bin/$name" && "$have" == "$want" ]]; then
    echo "reuse  $name ($bin/$name)"
    return 0
  fi
  echo "build  $name from $pkg"
  local t0=$SECONDS
  (cd "$here/$dir" && "$go" build -trimpath -ldflags "-s -w $extra" -o "$bin/$name.tmp" "$pkg")
  mv -f "$bin/$name.tmp" "$bin/$name"
  echo "$want" > "$bin/.$name.stamp"
  echo "built  $name in $((SECONDS - t0))s"
}

# Stamp the release into the binaries as Kubernetes' own build does (hack/lib/version.sh);
# otherwise they report v0.0.0-master and kubectl warns about version skew.
minor="${k8s_version#v1.}"; minor="${minor%%.*}"
kv=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kv+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  kv+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

build_one etcd go.etcd.io/etcd/server/v3 etcd
build_one k8s k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "$kv"
build_one k8s k8s.io/kubernetes/cmd/kube-controller-manager kube-controller-manager "$kv"
build_one k8s k8s.io/kubernetes/cmd/kubectl kubectl "$kv"
if [[ $node -eq 1 ]]; then
  build_one node k8s.io/kubernetes/cmd/kube-scheduler kube-scheduler "$kv"
  build_one node k8s.io/kubernetes/cmd/kubelet kubelet "$kv"
fi

cat > "$out/versions.env" <<VERS
KUBERNETES_VERSION=$k8s_version
ETCD_VERSION=$etcd_version
GO_VERSION=$("$go" env GOVERSION)
VERS
echo "binaries: $bin"
