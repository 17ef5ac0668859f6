#!/usr/bin/env bash
# Builds CRI-O (crio, pinns, and CRI-O's own copyimg, which writes an image archive into the
# containers/storage crio reads) from the Go module pinned in integration/crio/, once per
# machine, into a cache outside the clone, and prints the directory of the binaries on its last
# line of stdout. scripts/node.sh runs node2 (and every even node) on it. A separate script and
# cache key from scripts/build-node.sh, so that a change here never rebuilds Kubernetes.
#
# Usage: scripts/build-crio.sh
#   BRAID_CRIO_CACHE   where builds are kept (default /var/cache/braid/crio); a build is keyed
#                      by the hash of integration/crio/{go.mod,go.sum} and this script.
#
# Needs gcc (cgo: the image blob cache's sqlite; pinns is C, built static as CRI-O's
# pinns/Makefile builds it). conmon and the OCI runtime (runc) are Debian's, not built here.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v go >/dev/null 2>&1 || { echo "build-crio: no go on PATH (Go 1.26 or later is needed)" >&2; exit 1; }
command -v gcc >/dev/null 2>&1 || { echo "build-crio: no gcc (cgo and pinns need it)" >&2; exit 1; }
mod=integration/crio
version="$(cd "$mod" && go list -m -f '{{.Version}}' github.com/cri-o/cri-o)"
[ -n "$version" ] || { echo "build-crio: cannot read the pinned version from $mod/go.mod" >&2; exit 1; }

key="$( { cat "$mod/go.mod" "$mod/go.sum" "$0"; } | sha256sum | cut -c1-16)"
cache="${BRAID_CRIO_CACHE:-/var/cache/braid/crio}"
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
# CRI-O's Makefile chooses these tags by probing the machine (hack/*_tag.sh); here they are
# fixed so the build needs no C library but libc: containers_image_openpgp (signatures in Go,
# no gpgme), exclude_graphdriver_btrfs (no btrfs headers), containers_image_ostree_stub (as the
# Makefile), and no seccomp, selinux or apparmor tags (the node's pods run without them).
tags="containers_image_openpgp containers_image_ostree_stub exclude_graphdriver_btrfs exclude_graphdriver_devicemapper"
flags="-s -w -X github.com/cri-o/cri-o/internal/version.buildCommit=$version"
echo "== build-crio: CRI-O $version: crio copyimg" >&2
(cd "$mod" && CGO_ENABLED=1 go build -trimpath -tags "$tags" -ldflags "$flags" -o "$tmp/bin/" \
  github.com/cri-o/cri-o/cmd/crio github.com/cri-o/cri-o/test/copyimg)
echo "== build-crio: pinns" >&2
src="$(cd "$mod" && go list -m -f '{{.Dir}}' github.com/cri-o/cri-o)/pinns/src"
gcc -std=c99 -Os -O3 -Wall -Wextra -static -o "$tmp/bin/pinns" "$src"/*.c
strip -s "$tmp/bin/pinns"
printf '%s\n' "crio=$version" "seconds=$((SECONDS - started))" > "$tmp/versions"
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "== build-crio: built in $((SECONDS - started)) s into $out/bin" >&2
echo "$out/bin"
