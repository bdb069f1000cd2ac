#!/usr/bin/env bash
# Install (or reuse) the command-line tools the packaging tests need, built from the Go
# module proxy and cached under ${PTAH_CACHE:-~/.cache/ptah}/tools/bin:
#   helm  (helm lint / helm template over deploy/helm/ptah)
#   bash hack/tools.sh            # install what is missing; warm: well under a second
#   bash hack/tools.sh --print-dir
# A tool is reused when `helm version` reports the pinned version; anything else rebuilds.
set -euo pipefail
HELM_VERSION=v3.22.0
export PTAH_CACHE=${PTAH_CACHE:-$HOME/.cache/ptah}
bin="$PTAH_CACHE/tools/bin"
if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null || export PATH=/usr/local/go/bin:$PATH
mkdir -p "$bin"
have=$("$bin/helm" version --template '{{.Version}}' 2>/dev/null || true)
if [[ "$have" != "$HELM_VERSION" ]]; then
  echo "hack/tools.sh: building helm $HELM_VERSION into $bin (first time: a few minutes)" >&2
  GOBIN="$bin" CGO_ENABLED=0 GOFLAGS=-buildvcs=false go install \
    -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi
"$bin/helm" version --template '{{.Version}}' | grep -qx "$HELM_VERSION" || {
  echo "hack/tools.sh: $bin/helm does not report $HELM_VERSION" >&2
  exit 1
}
