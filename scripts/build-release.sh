#!/usr/bin/env bash
# Builds braid's deployable binaries and prints the directory holding them (last line of stdout).
#
# Static musl binaries, always: a plugin is exec'd several times per pod start (and podman sends
# VERSION to every plugin before almost every command), and a static binary starts in about half
# the time of a glibc-linked one (no dynamic loader, no glibc start-up). A release build never
# falls back to glibc binaries: the bench would measure binaries slower to start than the ones
# shipped, and scripts/build-image.sh refuses them. What the static build needs — the Rust
# target <arch>-unknown-linux-musl (rustup) and Debian's musl-tools (musl-gcc, for the C parts of
# braid-install's TLS, ring) — is installed when run as root; otherwise, or when that fails, the
# script exits 1 naming exactly what is missing and how to install it.
#
# The bench (braid-bench) is built in a cargo invocation of its own: its CRI client (tonic) would
# otherwise unify its features into the plugins' tokio, and the shipped plugins would differ from
# what a build of the plugins alone gives (braid-integration's test-only parts — the CRI client,
# the API fault proxy's hyper and rustls — are features its own tests turn on, so the plugins'
# build never selects them).
# braid-install is built on its own too: its Kubernetes client (kube, rustls, tokio, serde's
# derive features) must never unify into the plugins' dependencies. Its TLS (ring) has C parts,
# which need the musl C compiler (Debian's musl-tools) for the static build.
# braid-podresources (the delegator's PodResources helper) likewise: its gRPC client (tonic,
# hyper, tokio) stays out of the plugins' build.
set -euo pipefail
cd "$(dirname "$0")/.."

target="$(uname -m)-unknown-linux-musl"
root=false
[ "$(id -u)" -eq 0 ] && root=true
missing=()
if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  if ! $root || ! rustup target add "$target" >&2; then
    missing+=("the Rust target $target (install: rustup target add $target)")
  fi
fi
if ! command -v musl-gcc >/dev/null 2>&1; then
  if ! $root || ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 \
                    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends musl-tools >&2; }; then
    missing+=("Debian's musl-tools, for musl-gcc (install: apt-get install musl-tools)")
  fi
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-release: the static release build needs what is missing here (run as root to install it):" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
fi
export CC_"${target//-/_}"=musl-gcc
cargo build --release --locked -q --workspace --exclude braid-bench --exclude braid-install --exclude braid-podresources --bins --target "$target" >&2
cargo build --release --locked -q -p braid-install --bins --target "$target" >&2
cargo build --release --locked -q -p braid-podresources --bins --target "$target" >&2
cargo build --release --locked -q -p braid-bench --bins --target "$target" >&2
echo "$PWD/target/$target/release"
