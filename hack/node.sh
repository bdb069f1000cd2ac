#!/usr/bin/env bash
# Install (or find) what the dev cluster's real node needs from Debian, then build (or
# reuse) its images. Idempotent; warm: a few seconds.
#   containerd, runc, containernetworking-plugins  the container runtime and Pod network
#   buildah, mmdebstrap                            images without a registry or daemon
#   nftables, iptables, iproute2, gcc              the bridge's rules, the pause image
# Images (cached under ${PTAH_CACHE:-~/.cache/ptah}/images): the python:3.11-slim base
# from mmdebstrap, the pause image, and ptah/ptah:dev from the Dockerfile as it is.
#   bash hack/node.sh            # packages + images
#   bash hack/node.sh --packages # packages only
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
export PTAH_CACHE=${PTAH_CACHE:-$HOME/.cache/ptah}
t0=$SECONDS

need=()
for pair in containerd:containerd containerd-shim-runc-v2:containerd runc:runc \
            buildah:buildah mmdebstrap:mmdebstrap nft:nftables iptables:iptables \
            ip:iproute2 gcc:gcc; do
  command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
done
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
# gcc -static needs libc.a
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -f /usr/lib/aarch64-linux-gnu/libc.a ] || need+=(libc6-dev)
if [ ${#need[@]} -gt 0 ]; then
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
  if [ "$(id -u)" != 0 ]; then echo "node.sh: need root to install ${need[*]}" >&2; exit 1; fi
  echo "node.sh: installing ${need[*]}"
  apt-get update -qq
  # Packages only: a distribution service (containerd.service) is never ours to start.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${need[@]}" >/dev/null
fi
echo "node.sh: packages ready in $((SECONDS - t0))s"
[[ "${1:-}" == "--packages" ]] && exit 0

t1=$SECONDS
"$here/.venv/bin/python" - "$here" <<'PY'
import sys
from pathlib import Path
from ptah.testing.devcluster import imagebuild
imagebuild.store().mkdir(parents=True, exist_ok=True)
for built in (imagebuild.build_pause(), imagebuild.build_base(),
              imagebuild.build_project(Path(sys.argv[1]))):
    how = "cached" if built.cached else "built"
    print(f"node.sh: {how} {built.name} in {built.seconds:.1f}s")
PY
echo "node.sh: images ready in $((SECONDS - t1))s"
