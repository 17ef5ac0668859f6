#!/usr/bin/env bash
# Builds Multus CNI (thin plugin, thick daemon and shim, and the entrypoints its images run) from
# the Go module pinned in integration/multus/, once per machine, into a cache outside the
# clone, and prints the directory of the binaries on its last line of stdout. Only the node bench
# (braid-bench --only node) uses it: a separate script and cache key from scripts/build-node.sh, so
# that a change here never rebuilds Kubernetes.
#
# Usage: scripts/build-multus.sh
#   BRAID_MULTUS_CACHE   where builds are kept (default /var/cache/braid/multus); a build is keyed
#                        by the hash of integration/multus/{go.mod,go.sum} and this script.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v go >/dev/null 2>&1 || { echo "build-multus: no go on PATH (Go 1.26 or later is needed)" >&2; exit 1; }
mod=integration/multus
version="$(cd "$mod" && go list -m -f '{{.Version}}' gopkg.in/k8snetworkplumbingwg/multus-cni.v4)"
[ -n "$version" ] || { echo "build-multus: cannot read the pinned version from $mod/go.mod" >&2; exit 1; }

key="$( { cat "$mod/go.mod" "$mod/go.sum" "$0"; } | sha256sum | cut -c1-16)"
cache="${BRAID_MULTUS_CACHE:-/var/cache/braid/multus}"
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
# Multus's hack/build-go.sh stamps these; its images build with CGO_ENABLED=0.
m=gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/multus
flags="-s -w -X $m.version=$version -X $m.gitTreeState=clean"
echo "== build-multus: Multus $version" >&2
(cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$flags" -o "$tmp/bin/" \
  gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus \
  gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus-daemon \
  gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus-shim \
  gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/thin_entrypoint \
  gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/install_multus)
# install_multus copies passthru beside the shim or the thin plugin, and fails without it.
(cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$flags" -o "$tmp/bin/passthru" \
  gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/passthru-cni)
printf '%s\n' "multus=$version" "seconds=$((SECONDS - started))" > "$tmp/versions"
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "== build-multus: built in $((SECONDS - started)) s into $out/bin" >&2
echo "$out/bin"
