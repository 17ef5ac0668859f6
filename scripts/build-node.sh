#!/usr/bin/env bash
# Builds the real node's parts from the Go modules pinned under integration/node/ (Kubernetes,
# etcd, containerd and its runc shim, the pause program) once per machine, into a cache outside
# the clone, and prints the directory of the binaries on its last line of stdout.
#
# Usage: scripts/build-node.sh
#   BRAID_NODE_CACHE   where built parts are kept (default /var/cache/braid/node). A build is
#                      keyed by the hash of every go.mod, go.sum and .go file under
#                      integration/node/ (but integration/node/dradriver/, which
#                      scripts/build-dradriver.sh builds under a key of its own) and of this
#                      script: a change to a pin builds anew, the same pins reuse what a clone
#                      built before (CI's clones included).
#
# The Go module and build caches (go env GOMODCACHE GOCACHE) are kept between builds too; the
# first build on a 2-core machine takes the time README.md gives. Nothing here is shipped:
# braid's own binaries are Rust.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '== build-node: %s\n' "$*" >&2; }

command -v go >/dev/null 2>&1 || { echo "build-node: no go on PATH (Go 1.26 or later is needed)" >&2; exit 1; }

k8s_version="$(cd integration/node/kubernetes && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
ctrd_version="$(cd integration/node/containerd && go list -m -f '{{.Version}}' github.com/containerd/containerd/v2)"
[ -n "$k8s_version" ] && [ -n "$ctrd_version" ] || { echo "build-node: cannot read the pinned versions from integration/node/*/go.mod" >&2; exit 1; }

# integration/node/dradriver (braid's test DRA driver) is not in this key: scripts/build-dradriver.sh
# builds it under a key of its own, so that a change to it never rebuilds Kubernetes.
key="$( { find integration/node -path integration/node/dradriver -prune -o -type f \( -name go.mod -o -name go.sum -o -name '*.go' \) -print | LC_ALL=C sort | xargs cat; cat "$0"; } | sha256sum | cut -c1-16)"
cache="${BRAID_NODE_CACHE:-/var/cache/braid/node}"
out="$cache/$key"
if [ -f "$out/.complete" ]; then
  echo "$out/bin"
  exit 0
fi

mkdir -p "$cache"
tmp="$(mktemp -d "$cache/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
started=$SECONDS

# The Kubernetes binaries report the pinned version (not v0.0.0-master): the release build sets
# these through hack/lib/version.sh.
minor="${k8s_version#v1.}"; minor="${minor%%.*}"
kflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
log "Kubernetes $k8s_version: kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl"
(cd integration/node/kubernetes && CGO_ENABLED=0 go build -trimpath -ldflags "$kflags" -o "$tmp/bin/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl)

# containerd's Makefile: no btrfs headers here (no_btrfs), and the shim static (SHIM_CGO_ENABLED=0).
log "containerd $ctrd_version: containerd ctr containerd-shim-runc-v2"
cflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$ctrd_version"
(cd integration/node/containerd && CGO_ENABLED=0 go build -trimpath -tags no_btrfs -ldflags "$cflags" -o "$tmp/bin/" \
  github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/ctr)
(cd integration/node/containerd && CGO_ENABLED=0 go build -trimpath -ldflags "$cflags" -o "$tmp/bin/" \
  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2)

log "etcd"
(cd integration/node/etcd && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/bin/etcd" .)

log "pause"
(cd integration/node/pause && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/bin/pause" .)

# braid's test device plugin (integration/node/deviceplugin): PCI-address-shaped devices the
# real kubelet allocates to pods, for the networks that name a resource.
log "deviceplugin"
(cd integration/node/deviceplugin && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/bin/braid-deviceplugin" .)

printf '%s\n' "kubernetes=$k8s_version" "containerd=$ctrd_version" "seconds=$((SECONDS - started))" > "$tmp/versions"
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
log "built in $((SECONDS - started)) s into $out/bin"
echo "$out/bin"
