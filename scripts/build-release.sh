#!/usr/bin/env bash
# Builds braid's deployable binaries and prints the directory holding them (last line of stdout).
#
# Static musl binaries when the Rust musl target can be had: a plugin is exec'd several times per
# pod start (and podman sends VERSION to every plugin before almost every command), and a static
# binary starts in about half the time of a glibc-linked one (no dynamic loader, no glibc start-up).
# Falls back to glibc-linked binaries, saying so, when the target cannot be installed.
#
# The bench (braid-bench) is built in a cargo invocation of its own: its CRI client (tonic) would
# otherwise unify its features into the plugins' tokio, and the shipped plugins would differ from
# what a build of the plugins alone gives. kube-standin (integration/apiserver, the test API
# server; a library, no binaries) is excluded for the same reason: even unbuilt, a selected
# package's dependencies unify their features (axum's hyper and tokio, memchr/serde_core
# "default") into the plugins' build.
# braid-install is built on its own too: its Kubernetes client (kube, rustls, tokio, serde's
# derive features) must never unify into the plugins' dependencies. Its TLS (ring) has C parts,
# which need the musl C compiler (Debian's musl-tools) for the static build.
set -euo pipefail
cd "$(dirname "$0")/.."

target="$(uname -m)-unknown-linux-musl"
if command -v musl-gcc >/dev/null 2>&1; then
  export CC_"${target//-/_}"=musl-gcc
fi
if rustup target list --installed 2>/dev/null | grep -qx "$target" \
   || rustup target add "$target" >/dev/null 2>&1; then
  if cargo build --release --locked -q --workspace --exclude braid-bench --exclude braid-install --exclude kube-standin --bins --target "$target" >&2 \
     && cargo build --release --locked -q -p braid-install --bins --target "$target" >&2 \
     && cargo build --release --locked -q -p braid-bench --bins --target "$target" >&2; then
    echo "$PWD/target/$target/release"
    exit 0
  fi
  echo "WARNING: the static ($target) build failed; building glibc-linked binaries instead" >&2
else
  echo "WARNING: Rust target $target unavailable; building glibc-linked binaries (slower to start)" >&2
fi
cargo build --release --locked -q --workspace --exclude braid-bench --exclude braid-install --exclude kube-standin --bins >&2
cargo build --release --locked -q -p braid-install --bins >&2
cargo build --release --locked -q -p braid-bench --bins >&2
echo "$PWD/target/release"
