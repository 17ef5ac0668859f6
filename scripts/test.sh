#!/usr/bin/env bash
# All of braid's tests: formatting, lints, unit tests, and (as root) the namespace tests.
# Installs what it needs on a fresh Debian machine. Usage: sudo scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '== %s\n' "$*"; }

need_pkgs=()
command -v ip >/dev/null 2>&1 || need_pkgs+=(iproute2)
[ -x /usr/lib/cni/bridge ] || need_pkgs+=(containernetworking-plugins)
# The real-runtime tests (integration/tests/podman.rs, containerd.rs): podman 4.3 with its CNI
# backend, containerd 1.6 with CRI, and static busybox for the images they build on the spot.
command -v podman >/dev/null 2>&1 || need_pkgs+=(podman)
command -v runc >/dev/null 2>&1 || need_pkgs+=(runc)
command -v conmon >/dev/null 2>&1 || need_pkgs+=(conmon)
# The real node's CRI-O (node2, scripts/node.sh): its runc wrapper edits bundles with jq.
command -v jq >/dev/null 2>&1 || need_pkgs+=(jq)
[ -x /usr/bin/catatonit ] || [ -x /usr/libexec/podman/catatonit ] || need_pkgs+=(catatonit)
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q "ok installed" || need_pkgs+=(busybox-static)
command -v containerd >/dev/null 2>&1 || need_pkgs+=(containerd)
command -v nsenter >/dev/null 2>&1 || need_pkgs+=(util-linux)
command -v tar >/dev/null 2>&1 || need_pkgs+=(tar)
# The chained-plugin tests (integration/tests/chains.rs): portmap and firewall run iptables.
command -v iptables-save >/dev/null 2>&1 || need_pkgs+=(iptables)
# The VM tests (integration/tests/vm_boot.rs): QEMU under TCG. Their kernel is not installed:
# integration/src/vm/kernel.rs fetches the package `apt-cache depends linux-image-cloud-amd64` names with
# `apt-get download` into target/vm/ once, so apt's index must know it.
command -v qemu-system-x86_64 >/dev/null 2>&1 || need_pkgs+=(qemu-system-x86)
# The static release build of braid-install (its TLS, ring, has C parts): musl's C compiler.
command -v musl-gcc >/dev/null 2>&1 || need_pkgs+=(musl-tools)
# The delegator's no-connection test traces a real ADD's system calls.
command -v strace >/dev/null 2>&1 || need_pkgs+=(strace)
# The real node (scripts/node.sh, integration/tests/kube_node.rs): its parts are built from Go
# modules (scripts/build-node.sh, once per machine); its certificates come from openssl, its
# health checks use curl, kube-proxy programs iptables.
command -v openssl >/dev/null 2>&1 || need_pkgs+=(openssl)
command -v curl >/dev/null 2>&1 || need_pkgs+=(curl)
need_index=0
case "$(apt-cache depends linux-image-cloud-amd64 2>/dev/null)" in
  *"Depends: linux-image-"*) ;;
  *) need_index=1 ;;
esac
if [ ${#need_pkgs[@]} -gt 0 ] || [ "$need_index" -eq 1 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    log "apt-get update"
    apt-get update -qq
    if [ ${#need_pkgs[@]} -gt 0 ]; then
      log "installing ${need_pkgs[*]}"
      apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
    fi
  else
    if [ ${#need_pkgs[@]} -gt 0 ]; then
      log "WARNING: missing ${need_pkgs[*]} and cannot install them (not root or no apt-get)"
    fi
    if [ "$need_index" -eq 1 ]; then
      log "WARNING: apt's index does not know linux-image-cloud-amd64 (the VM tests' kernel) and cannot be updated (not root or no apt-get)"
    fi
  fi
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install the Rust toolchain (rustup) first" >&2
  exit 1
fi
rustup component list --installed 2>/dev/null | grep -q rustfmt || rustup component add rustfmt clippy >/dev/null 2>&1 || true

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

log "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked -q

# The four author-facing crates as crates.io would get them: each packaged (only what its
# `include` lists) and built from that package alone, in dependency order, against the others'
# packages (cargo's local overlay registry); then their docs as docs.rs builds them (its
# `--cfg docsrs`, every feature). --allow-dirty: a developer's uncommitted work is checked too.
published=(-p cni-types -p cni-skel -p cni-runtime -p cni-netlink)
log "cargo package: cni-types, cni-skel, cni-runtime, cni-netlink"
cargo package --locked -q --allow-dirty "${published[@]}"
RUSTDOCFLAGS="--cfg docsrs -D warnings" cargo doc --no-deps --all-features --locked -q "${published[@]}"

log "cargo build (plugin binaries the namespace tests run)"
cargo build --workspace --bins --locked -q

# The installer image's tests (integration/tests/install.rs) build deploy/Containerfile from the
# static release binaries; build them once here rather than inside a test.
log "release build (static binaries for the installer image)"
BRAID_RELEASE_DIR="$(bash scripts/build-release.sh | tail -n1)"
export BRAID_RELEASE_DIR

command -v go >/dev/null 2>&1 || { echo "go not found: the reference plugins and the real node's parts are built with Go 1.26.8 or later" >&2; exit 1; }
# The reference plugins every test, the node and the bench run: containernetworking/plugins at
# the version integration/cni-plugins/go.mod pins, built once per machine into
# /var/cache/braid/cni-plugins (Debian's 2022 package stays for the demo's fast first run).
log "the reference plugins (scripts/build-cni-plugins.sh)"
BRAID_CNI_PLUGINS="$(bash scripts/build-cni-plugins.sh | tail -n1)"
export BRAID_CNI_PLUGINS
# The real node's parts (Kubernetes, etcd, containerd) from the Go modules under
# integration/node/: built once per machine into /var/cache/braid/node, reused after. Its kubectl
# (kustomize v5) is also the one the manifest tests render deploy/kubernetes with: a directory
# holding only it goes first on PATH (the containerd tests keep Debian's containerd 1.6).
log "the real node's parts (scripts/build-node.sh)"
node_bin="$(bash scripts/build-node.sh | tail -n1)"
# braid's test DRA driver (kube_devices.rs starts it through `scripts/node.sh dradriver`): its
# own script and cache key, so that it never rebuilds the parts above.
bash scripts/build-dradriver.sh >/dev/null
mkdir -p target/node-tools
ln -sfn "$node_bin/kubectl" target/node-tools/kubectl
export PATH="$PWD/target/node-tools:$PATH"

# A two-node cluster for integration/tests/kube_node.rs and kube_devices.rs (root only), down again on exit. If it
# does not come up, BRAID_NODE_DIR stays unset: those tests then fail under
# BRAID_REQUIRE_ROOT_TESTS=1 (and print SKIPPED otherwise).
node_dir=""
out="$(mktemp)"
trap 'rm -f "$out"; if [ -n "$node_dir" ]; then BRAID_NODE_DIR="$node_dir" bash scripts/node.sh down >/dev/null 2>&1 || true; fi' EXIT
if [ "$(id -u)" -eq 0 ]; then
  mkdir -p /var/lib/braid
  node_dir="$(mktemp -d /var/lib/braid/test-node.XXXXXX)"
  log "scripts/node.sh up 2 (in $node_dir)"
  if BRAID_NODE_DIR="$node_dir" bash scripts/node.sh up 2 > /dev/null 2> "$node_dir.up.log"; then
    export BRAID_NODE_DIR="$node_dir"
  else
    cat "$node_dir.up.log"
    tail -n 30 "$node_dir"/logs/*.log 2>/dev/null || true
    echo "scripts/node.sh up 2 FAILED: the real-node tests will fail" >&2
  fi
  rm -f "$node_dir.up.log"
fi

log "cargo test"
set +e
cargo test --workspace --locked 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
set -e
# The cluster is no longer needed: down before the demos (they bring up their own).
if [ -n "$node_dir" ]; then
  BRAID_NODE_DIR="$node_dir" bash scripts/node.sh down >/dev/null 2>&1 || echo "scripts/node.sh down FAILED" >&2
  node_dir=""
  unset BRAID_NODE_DIR
fi
# The README's first command is part of the suite: it must work as written (root only).
if [ "$(id -u)" -eq 0 ]; then
  log "scripts/demo.sh (the README's first command)"
  if ! bash scripts/demo.sh > "$out.demo" 2>&1; then
    cat "$out.demo"
    echo "scripts/demo.sh FAILED"
    demo_failed=1
    status=1
  else
    tail -n 3 "$out.demo"
  fi
  rm -f "$out.demo"
  log "scripts/demo-kubernetes.sh (the README's real-Kubernetes demo)"
  if ! bash scripts/demo-kubernetes.sh > "$out.demo" 2>&1; then
    cat "$out.demo"
    echo "scripts/demo-kubernetes.sh FAILED"
    demo_failed=1
    status=1
  else
    tail -n 3 "$out.demo"
  fi
  rm -f "$out.demo"
else
  echo "*** SKIPPED scripts/demo.sh, scripts/demo-kubernetes.sh: need root ***"
fi
# One closing line over every test binary (cargo prints one per binary, the last often a crate's
# empty doc-tests). A test that could not run on this kernel (e.g. VRF) returns "ok" to cargo
# but prints a "*** SKIPPED" line past libtest's capture: it counts as skipped, not passed.
awk -v demo="${demo_failed:-0}" '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;/) p += $i; if ($(i+1) ~ /^failed;/) f += $i; if ($(i+1) ~ /^ignored;/) g += $i } }
     /^\*\*\* SKIPPED / { s++ }
     END { printf "%d passed, %d failed, %d skipped\n", p - s, f + demo, g + s }' "$out"
exit "$status"
