#!/usr/bin/env bash
# Builds braid's installer image (deploy/Containerfile) from the static release binaries, offline
# (FROM scratch: nothing is pulled). Usage: scripts/build-image.sh [TAG]
#   TAG                 default localhost/braid-install:<version>
#   PODMAN              the podman command line to use (default: podman), e.g. with --root
#   BRAID_RELEASE_DIR   take the binaries from here instead of running scripts/build-release.sh
# Prints the tag on its last line of stdout. Refuses glibc-linked binaries: a scratch image has
# no dynamic loader.
set -euo pipefail
cd "$(dirname "$0")/.."

version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)"
tag="${1:-localhost/braid-install:$version}"
dir="${BRAID_RELEASE_DIR:-$(bash scripts/build-release.sh | tail -n1)}"
bins=(delegator braid-podresources merger verifier vmtap braid-install)

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
for b in "${bins[@]}"; do
  [ -x "$dir/$b" ] || { echo "build-image: $dir/$b missing (scripts/build-release.sh builds it)" >&2; exit 1; }
  # A static ELF has no PT_INTERP program header (no .interp section).
  if od -An -c -N 4096 "$dir/$b" | tr -d ' \n' | grep -q 'ld-linux'; then
    echo "build-image: $dir/$b is dynamically linked; the image needs the static musl build" >&2
    exit 1
  fi
  cp "$dir/$b" "$ctx/"
done
# shellcheck disable=SC2086 # PODMAN is a command line on purpose
${PODMAN:-podman} build --quiet --pull=never -f deploy/Containerfile -t "$tag" "$ctx" >&2
echo "$tag"
