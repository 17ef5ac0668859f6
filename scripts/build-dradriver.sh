#!/usr/bin/env bash
# Builds braid's test DRA driver (integration/node/dradriver: a second DRA driver on the real
# node, whose devices carry Multus's attributes) from its Go modules, once per machine, into a
# cache outside the clone, and prints the directory of the binary on its last line of stdout.
# scripts/node.sh runs it (`scripts/node.sh dradriver NODE`). A separate script and cache key
# from scripts/build-node.sh (whose key leaves its directory out), so that a change to the driver
# never rebuilds Kubernetes, etcd and containerd: it needs only k8s.io/dynamic-resource-allocation
# and the client modules, a build of seconds once the Go build cache holds them.
#
# Usage: scripts/build-dradriver.sh
#   BRAID_DRADRIVER_CACHE   where builds are kept (default /var/cache/braid/dradriver); a build
#                           is keyed by the hash of integration/node/dradriver's go.mod, go.sum
#                           and .go files and of this script.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v go >/dev/null 2>&1 || { echo "build-dradriver: no go on PATH (Go 1.26 or later is needed)" >&2; exit 1; }
mod=integration/node/dradriver
key="$( { find "$mod" -type f \( -name go.mod -o -name go.sum -o -name '*.go' \) | LC_ALL=C sort | xargs cat; cat "$0"; } | sha256sum | cut -c1-16)"
cache="${BRAID_DRADRIVER_CACHE:-/var/cache/braid/dradriver}"
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
echo "== build-dradriver: braid-dradriver" >&2
(cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/bin/braid-dradriver" .)
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "== build-dradriver: built in $((SECONDS - started)) s into $out/bin" >&2
echo "$out/bin"
