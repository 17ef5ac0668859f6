#!/usr/bin/env bash
# braid's main job, shown on real plugins in throwaway namespaces. Usage: sudo scripts/demo.sh
# Installs what it needs, builds the release binaries, and cleans up in every case. It never
# touches this machine's own network namespace: everything runs in namespaces it creates.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" -eq 0 ] || { echo "run as root: sudo scripts/demo.sh" >&2; exit 1; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

need=()
command -v ip >/dev/null || need+=(iproute2)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
if [ ${#need[@]} -gt 0 ]; then
  step "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

step "building release binaries"
bin="$(bash scripts/build-release.sh | tail -n1)"

id="demo$$"
host="braid-demo-host-$$"
ctr="braid-demo-ctr-$$"
work="$(mktemp -d /tmp/braid-demo.XXXXXX)"
cleanup() {
  ip netns delete "$ctr" 2>/dev/null || true
  ip netns delete "$host" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

step "creating throwaway namespaces $host (the node) and $ctr (the pod)"
ip netns add "$host"
ip netns add "$ctr"
ip -n "$host" link set lo up
ip -n "$ctr" link set lo up

cat > "$work/demo.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "braid-demo",
  "plugins": [
    {
      "type": "delegator",
      "result": "merged",
      "stateDir": "$work/state",
      "delegates": [
        {
          "cniVersion": "1.0.0", "name": "cluster", "type": "bridge", "bridge": "braiddemo0", "isGateway": true,
          "ipam": {
            "type": "host-local", "dataDir": "$work/ipam",
            "ranges": [[{"subnet": "198.18.20.0/24", "gateway": "198.18.20.1"}]],
            "routes": [{"dst": "0.0.0.0/0", "gw": "198.18.20.1"}]
          }
        },
        {
          "cniVersion": "0.4.0", "name": "storage", "type": "ptp",
          "ipam": {
            "type": "host-local", "dataDir": "$work/ipam",
            "ranges": [[{"subnet": "198.18.21.0/24"}]],
            "routes": [{"dst": "198.19.21.0/24", "gw": "198.18.21.1"}]
          }
        }
      ]
    },
    {"type": "tuning", "mtu": 1400},
    {"type": "verifier"}
  ]
}
JSON
echo "conflist: the delegator attaches a bridge network (eth0, cniVersion 1.0.0) and a ptp network"
echo "(net1, cniVersion 0.4.0) and returns both merged as one result (1.0.0: Debian's tuning, which runs after it, speaks up to 1.0.0);"
echo "the verifier, last, proves with netlink that the final result matches the pod's namespace:"
cat "$work/demo.conflist"

tool() {
  ip netns exec "$host" "$bin/braid-cnitool" "$1" "$work/demo.conflist" \
    --netns "/run/netns/$ctr" --ifname eth0 --id "$id" --cache "$work/cache" \
    --path "$bin:/usr/lib/cni" --args "IgnoreUnknown=1;K8S_POD_NAME=demo"
}

step "ADD: the merged result the runtime receives (every interface, each IP pointing at its own)"
tool add
step "the container's view (ip addr, ip route)"
ip -n "$ctr" -br addr
ip -n "$ctr" route
step "CHECK (every plugin; the verifier checks every interface, IP and route of the merged result)"
tool check && echo "CHECK passed"

step "operators' mode: the verifier reads the runtime's cached result and shows each claim"
ip netns exec "$host" "$bin/verifier" --netns "/run/netns/$ctr" < "$work/cache/results/braid-demo-$id-eth0"

step "tampering: the pod's default route now points at 198.18.20.254 (upstream CHECKs compare only dst of default routes)"
ip -n "$ctr" route replace default via 198.18.20.254 dev eth0
if out="$(tool check 2>&1)"; then
  echo "CHECK passed although the default route was changed: the verifier missed it" >&2
  exit 1
fi
echo "CHECK failed, as it must:"
echo "$out"
ip -n "$ctr" route replace default via 198.18.20.1 dev eth0
tool check && echo "route restored: CHECK passes again"
step "DEL"
tool del && echo "DEL passed"

step "proof that nothing is left"
left=0
for l in eth0 net1; do
  if ip -n "$ctr" link show "$l" >/dev/null 2>&1; then echo "$l still in the container"; left=1; fi
done
if ip -n "$host" -br link | grep -q '^veth'; then echo "a veth is still on the node"; left=1; fi
if find "$work/ipam" -name '198.18.*' 2>/dev/null | grep -q .; then echo "an IP reservation is left"; left=1; fi
if [ -n "$(ls -A "$work/cache/results" 2>/dev/null)" ]; then echo "a cache file is left"; left=1; fi
# .braid-owner records which plugin kind the stateDir serves; it stays by design.
if find "$work/state" -maxdepth 1 -type f ! -name .braid-owner 2>/dev/null | grep -q .; then echo "a delegator state file is left"; left=1; fi
[ "$left" -eq 0 ] || exit 1
echo "no interface, no IP reservation, no state or cache file left (bridge leaves its bridge device on the node by design; it goes with the node namespace)"
step "demo finished"
