#!/usr/bin/env bash
# Builds the CNI reference plugins (github.com/containernetworking/plugins, the version pinned in
# integration/cni-plugins/go.mod) once per machine into a cache outside the clone, and prints the
# directory of the plugins on its last line of stdout. Every test, the real node and the bench
# run these as braid's delegates and chained peers — the plugins operators run today, not the
# 2022 release Debian packages (1.1.1). The demo keeps Debian's package for a fast first run.
#
# Usage: scripts/build-cni-plugins.sh
#   BRAID_CNI_PLUGINS_CACHE   where builds are kept (default /var/cache/braid/cni-plugins); a build
#                             is keyed by the hash of integration/cni-plugins/{go.mod,go.sum} and
#                             this script.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v go >/dev/null 2>&1 || { echo "build-cni-plugins: no go on PATH (Go 1.26.8 or later is needed)" >&2; exit 1; }
mod=integration/cni-plugins
version="$(cd "$mod" && go list -m -f '{{.Version}}' github.com/containernetworking/plugins)"
[ -n "$version" ] || { echo "build-cni-plugins: cannot read the pinned version from $mod/go.mod" >&2; exit 1; }

key="$( { cat "$mod/go.mod" "$mod/go.sum" "$0"; } | sha256sum | cut -c1-16)"
cache="${BRAID_CNI_PLUGINS_CACHE:-/var/cache/braid/cni-plugins}"
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
echo "== build-cni-plugins: containernetworking/plugins $version" >&2
# As upstream's build_linux.sh builds its release: static (CGO_ENABLED=0), the version stamped
# where `<plugin> --version` (and the VERSION command's about text) reads it. Every plugin the
# go.mod names as a tool; the binary is named for its package's last element, as upstream's.
tools="$(sed -n 's/^\t\(github.com\/containernetworking\/plugins\/plugins\/[^ ]*\)$/\1/p' "$mod/go.mod")"
[ -n "$tools" ] || { echo "build-cni-plugins: no plugin tool directives in $mod/go.mod" >&2; exit 1; }
# shellcheck disable=SC2086 # one package per word
(cd "$mod" && CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$version" \
  -o "$tmp/bin/" $tools)
printf '%s\n' "plugins=$version" "seconds=$((SECONDS - started))" > "$tmp/versions"
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "== build-cni-plugins: built in $((SECONDS - started)) s into $out/bin" >&2
echo "$out/bin"
