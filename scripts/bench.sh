#!/usr/bin/env bash
# braid's benchmarks beside the reference plugins, with a verdict for each budget.
# Usage: sudo scripts/bench.sh [OUTDIR]   (default docs/bench; --quick as a second argument for a
# smoke run with a tenth of the repetitions). Writes results.md, results.csv, budgets.csv and
# results.svg (and, for the default directory, the README's results section); exits 0 when every
# budget holds, 3 when one does not or is unclear (its median's interval straddles the limit after
# the most rounds its case runs: docs/bench/NOTES.md), 1 when the run failed. 9–17 minutes on two
# cores (comparisons close to a limit run more rounds). The full run includes a crash run
# (200 SIGKILLs of the delegator and of the merger, sequential and parallel, each then DEL) and a
# churn soak (200 pods through containerd's CRI with braid installed beside 200 on the plain
# bridge primary, 4 workers, containerd SIGKILLed part-way: pods/s, RunPodSandbox latency, braid's
# share of it, nothing leaked; docs/bench/NOTES.md), and the node agent's network-status and
# hot-plug on one one-node real Kubernetes both share (scripts/node.sh; its parts need Go, built
# once per machine by scripts/build-node.sh).
#        sudo scripts/bench.sh --crash [N]   only the crash run, N SIGKILLs per plugin and mode
# (default 500): a long hunt for rare crash windows that names every leftover it finds.
# One case alone (e.g. STATUS's cost): "$(bash scripts/build-release.sh | tail -n1)/braid-bench"
# --out DIR --only status (the cases: braid-bench --only help).
#        sudo scripts/bench.sh --node [OUTDIR]   only the node case (not in the full run: it needs
# the real node of scripts/node.sh, built from Go by scripts/build-node.sh, and Multus built by
# scripts/build-multus.sh; about 16 minutes a round on two cores — Multus thick's failing
# 40-pod bursts take a third of it — 6 rounds by default): bursts
# of 10 and 40 pods with 0, 1, 2, 4 secondary networks under braid, Multus v4.3 thick and thin,
# and the cluster network alone, on one node it brings up in BRAID_NODE_DIR (default
# /var/lib/braid/bench-node) and takes down after. Writes OUTDIR/node.md, node.csv,
# node-budgets.csv, node.svg (default docs/bench). BRAID_BENCH_NODE_ROUNDS (default 6),
# BRAID_BENCH_NODE_MAX_ROUNDS (default 10: more rounds, one at a time, while a budget is unclear)
# and BRAID_BENCH_NODE_PODS (default 10,40) change the rounds and the burst sizes.
#        sudo scripts/bench.sh --node-quick [OUTDIR]   only the quick node case (about 7 minutes
# on two cores; needs perf for the plugins' trace): 10-pod bursts, the cluster network alone vs
# braid (deploy/kubernetes-dra) at 0, 1, 4 networks by annotation and 1 by a ResourceClaim, on one
# node in BRAID_NODE_DIR (default /var/lib/braid/bench-node), taken down after. Writes
# OUTDIR/node-quick.md, .csv, -budgets.csv, .svg. BRAID_BENCH_NODE_QUICK_ROUNDS (default 2),
# BRAID_BENCH_NODE_QUICK_REPEATS (bursts of each kind per visit, default 3) and
# BRAID_BENCH_NODE_QUICK_PODS (default 10) change it (bench/README.md).
#        sudo scripts/bench.sh --node-memory [OUTDIR]  only the memory case (issue 50): 40-pod × 4
# network bursts under braid, Multus thick at its shipped 50Mi and Multus thick with its daemon's
# limit raised (BRAID_BENCH_MULTUS_LIMIT_MI, default 256, doubled after any burst that kills or
# restarts it) until it survives; BRAID_BENCH_NODE_MEMORY_ROUNDS (default 6) and
# BRAID_BENCH_NODE_MEMORY_PODS (default 40). Writes OUTDIR/node-memory.md, .csv, -budgets.csv, .svg.
# Runs everything in namespaces it creates; the machine's own network namespace is never touched.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" -eq 0 ] || { echo "run as root: sudo scripts/bench.sh" >&2; exit 1; }
out="${1:-docs/bench}"
quick="${2:-}"

need=()
command -v ip >/dev/null || need+=(iproute2)
# The static musl build (scripts/build-release.sh): braid-install's TLS (ring) has C parts, built
# with musl's C compiler (build-release.sh installs it too when root, and fails without it).
command -v musl-gcc >/dev/null || need+=(musl-tools)
# The churn soak (case "soak"): containerd 1.6 with CRI, runc, static busybox for its sandbox image.
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q "ok installed" || need+=(busybox-static)
# The real node (cases "kube" and "hotplug": scripts/node.sh, its parts built from Go modules once per machine):
# podman builds braid's image, openssl its certificates, curl its health checks, iptables kube-proxy.
for c in podman openssl curl iptables; do command -v "$c" >/dev/null || need+=("$c"); done
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

echo "== the reference plugins (scripts/build-cni-plugins.sh)" >&2
BRAID_CNI_PLUGINS="$(bash scripts/build-cni-plugins.sh | tail -n1)"
export BRAID_CNI_PLUGINS
echo "== building release binaries" >&2
bin="$(bash scripts/build-release.sh | tail -n1)"
# One real-node case alone: a one-node cluster in BRAID_NODE_DIR brought up, the case run, the
# cluster taken down; the case's exit status (3: a budget not held or unclear).
node_case() {
  local case="$1" dir="${quick:-docs/bench}" status=0 began=$SECONDS
  export BRAID_NODE_DIR="${BRAID_NODE_DIR:-/var/lib/braid/bench-node}" BRAID_RELEASE_DIR="$bin"
  bash scripts/node.sh up 1 >&2 || status=$?
  echo "== cluster up in $((SECONDS - began)) s" >&2
  began=$SECONDS
  if [ "$status" -eq 0 ]; then "$bin/braid-bench" --out "$dir" --only "$case" || status=$?; fi
  echo "== the $case case took $((SECONDS - began)) s" >&2
  bash scripts/node.sh down >&2 || true
  case "$status" in
    0) echo "== every $case budget holds ($dir/$case.md)" >&2 ;;
    3) echo "== some $case budgets do NOT hold or are unclear (see $dir/$case.md)" >&2 ;;
    *) echo "== the $case bench failed" >&2 ;;
  esac
  exit "$status"
}
case "$out" in
  --node | --node-memory)
    BRAID_MULTUS_BIN="$(bash scripts/build-multus.sh | tail -n1)"
    export BRAID_MULTUS_BIN
    node_case "${out#--}"
    ;;
  --node-quick)
    command -v perf >/dev/null || echo "== no perf: the quick node case's plugin trace (braid's own share) is left out" >&2
    node_case node-quick
    ;;
esac
if [ "$out" = "--crash" ]; then
  status=0
  "$bin/braid-bench" --crash "${quick:-500}" || status=$?
  [ "$status" -eq 0 ] && echo "== crash run: nothing left" >&2 || echo "== crash run: leftovers (see above)" >&2
  exit "$status"
fi
echo "== measuring the binaries in $bin" >&2
status=0
readme=()
# The default run is the one the README shows: refresh its results section too.
if [ "$out" = "docs/bench" ] && [ -z "$quick" ]; then readme=(--readme README.md); fi
"$bin/braid-bench" --out "$out" $quick "${readme[@]}" || status=$?
case "$status" in
  0) echo "== every budget holds" >&2 ;;
  3) echo "== some budgets do NOT hold or are unclear (see $out/results.md)" >&2 ;;
  *) echo "== the benchmark run failed" >&2 ;;
esac
exit "$status"
