#!/usr/bin/env bash
# braid's main job, shown on real plugins in throwaway namespaces. Usage: sudo scripts/demo.sh
# Installs what it needs, builds the release binaries, and cleans up in every case. It never
# touches this machine's own network namespace: everything runs in namespaces it creates.
# Part 1 drives the plugins with braid-cnitool; part 2 is a Kubernetes node: containerd's CRI
# (a daemon of the demo's own, in a throwaway namespace, as the integration tests run it) with
# braid installed by braid-install, and a pod annotated with two networks of the example ConfigMap;
# part 3, a VM gets all three networks: vmtap hands the pod interfaces of a merged result to a VM,
# and braid-vm boots QEMU (TCG, Debian's cloud kernel) on that result as a VM runtime would.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" -eq 0 ] || { echo "run as root: sudo scripts/demo.sh" >&2; exit 1; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
part() { printf '\n\033[1;7m#### %s ####\033[0m\n' "$*"; }

need=()
command -v ip >/dev/null || need+=(iproute2)
# The static musl build (scripts/build-release.sh): braid-install's TLS (ring) has C parts, built
# with musl's C compiler (build-release.sh installs it too when root, and fails without it).
command -v musl-gcc >/dev/null || need+=(musl-tools)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v jq >/dev/null || need+=(jq)
command -v pgrep >/dev/null || need+=(procps)
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
# The pod's sandbox image is built around static busybox (the dynamic one cannot run alone).
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q "ok installed" || need+=(busybox-static)
# Part 3's VM: QEMU under TCG. Its kernel is not installed: integration/src/vm/kernel.rs fetches the
# package `apt-cache depends linux-image-cloud-amd64` names into target/vm/ once (apt's index must know it).
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
if [ ${#need[@]} -gt 0 ] || ! apt-cache depends linux-image-cloud-amd64 2>/dev/null | grep -q "Depends: linux-image-"; then
  step "apt-get update${need[*]:+; installing ${need[*]}}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  [ ${#need[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

step "building release binaries (and braid-crictl, the demo's stand-in for the kubelet; braid-vm, its VM runtime)"
bin="$(bash scripts/build-release.sh | tail -n1)"
# Examples of the integration crate (the CRI client's gRPC stack and the VM support are no
# dependency of the plugins).
cargo build -q --locked -p braid-integration --example braid-crictl --example braid-vm
crictl="$PWD/target/debug/examples/braid-crictl"
braid_vm="$PWD/target/debug/examples/braid-vm"

id="demo$$"
host="braid-demo-host-$$"
ctr="braid-demo-ctr-$$"
node="braid-demo-node-$$"
vmid="demovm$$"
vmhost="braid-demo-vmhost-$$"
vmpod="braid-demo-vmpod-$$"
work="$(mktemp -d /tmp/braid-demo.XXXXXX)"
k="$work/node"                      # part 2: containerd's and braid's directories
sock="$k/containerd.sock"
cd_pid=""                           # containerd's PID once started
shims=/run/containerd/s             # containerd 1.6 keeps shim sockets there whatever its config says
made_dirs=()                        # of /run/containerd and the cgroup trees, those the demo created
for d in /run/containerd "$shims" /sys/fs/cgroup/k8s.io /sys/fs/cgroup/*/; do
  case "$d" in */) d="${d}k8s.io" ;; esac    # runc's cgroup parent, per v1 controller
  [ -e "$d" ] || made_dirs+=("$d")
done
cri() { "$crictl" "$sock" "$@"; }
# The tap (and tun) devices in namespace $1, one name a line.
taps() { ip -n "$1" -o link show type tun 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); print $2}'; }
# The sandboxes of the demo's containerd: the pod it ran and any other it knows of.
sandboxes() {
  { cat "$k/pods" 2>/dev/null; ctr --address "$sock" -n k8s.io containers ls -q 2>/dev/null; } | sort -u
}
stop_pid() {  # SIGTERM, then SIGKILL after $2 seconds
  local pid="$1" i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] && return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}
stop_node() {
  [ -n "$cd_pid" ] || return 0
  local ids id pid
  ids="$(sandboxes)"
  for id in $ids; do
    cri stopp "$id" >/dev/null 2>&1 || true
    cri rmp "$id" >/dev/null 2>&1 || true
  done
  stop_pid "$cd_pid" 10
  wait "$cd_pid" 2>/dev/null || true
  cd_pid=""
  # Shims outlive the daemon; their command lines name its socket (a path of the demo's own).
  for pid in $(pgrep -f -- "$sock" || true); do stop_pid "$pid" 3; done
  for id in $ids; do
    rm -f "$shims/$(printf '%s/k8s.io/%s' "$sock" "$id" | sha256sum | cut -d' ' -f1)"
    rm -f /var/lib/cni/results/*-"$id"-*
    for c in /sys/fs/cgroup/*/k8s.io/"$id" /sys/fs/cgroup/k8s.io/"$id"; do [ -d "$c" ] && rmdir "$c" 2>/dev/null; done
  done
  return 0
}
# Throwaway network namespaces, each with its loopback up.
netns_add() {
  local n
  for n in "$@"; do ip netns add "$n" && ip -n "$n" link set lo up; done
}
# braid-cnitool, from node namespace $2, runs command $1 of conflist $4 on pod namespace $3 with
# container ID $5; its libcni cache goes to $6/cache.
cnitool() {
  ip netns exec "$2" "$bin/braid-cnitool" "$1" "$4" --netns "/run/netns/$3" --ifname eth0 --id "$5" \
    --cache "$6/cache" --path "$bin:/usr/lib/cni" --args "IgnoreUnknown=1;K8S_POD_NAME=demo"
}
# What a conflist run from directory $1 (its ipam/, cache/ and state/) can leave, one line each.
files_left() {
  find "$1/ipam" -name '198.1*' 2>/dev/null | grep -q . && echo "an IP reservation is left"
  [ -n "$(ls -A "$1/cache/results" 2>/dev/null)" ] && echo "a cache file is left"
  # .braid-owner records which plugin kind the stateDir serves; it stays by design.
  find "$1/state" -maxdepth 1 -type f ! -name .braid-owner 2>/dev/null | grep -q . && echo "a delegator state file is left"
  return 0
}
# The delegator of parts 1 and 3 (merged result, state in $1/state, reservations in $1/ipam):
# a bridge "cluster" network on eth0 (bridge $2, 198.18.$3.0/24, the default route via .1), a ptp
# "storage" network on net1 (cniVersion $4, 198.18.$5.0/24, a route to 198.19.$5.0/24 via .1),
# then the delegate $6 if given (a JSON object).
delegator() {
  cat <<JSON
    {
      "type": "delegator",
      "result": "merged",
      "stateDir": "$1/state",
      "delegates": [
        {
          "cniVersion": "1.0.0", "name": "cluster", "type": "bridge", "bridge": "$2", "isGateway": true,
          "ipam": {
            "type": "host-local", "dataDir": "$1/ipam",
            "ranges": [[{"subnet": "198.18.$3.0/24", "gateway": "198.18.$3.1"}]],
            "routes": [{"dst": "0.0.0.0/0", "gw": "198.18.$3.1"}]
          }
        },
        {
          "cniVersion": "$4", "name": "storage", "type": "ptp",
          "ipam": {
            "type": "host-local", "dataDir": "$1/ipam",
            "ranges": [[{"subnet": "198.18.$5.0/24", "gateway": "198.18.$5.1"}]],
            "routes": [{"dst": "198.19.$5.0/24", "gw": "198.18.$5.1"}]
          }
        }${6:+,
        $6}
      ]
    }
JSON
}
cleanup() {
  stop_node
  # What containerd mounted below the demo's directory (pod namespaces, shm, rootfs), innermost first.
  awk -v p="$work/" 'index($5, p) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  local i
  for ((i = ${#made_dirs[@]} - 1; i >= 0; i--)); do rmdir "${made_dirs[$i]}" 2>/dev/null || true; done
  # Part 3's QEMU, if still running: the processes in the VM's pod namespace (the demo's own).
  local pid
  for pid in $(ip netns pids "$vmpod" 2>/dev/null); do stop_pid "$pid" 3; done
  local n
  for n in "$ctr" "$host" "$node" "$vmpod" "$vmhost"; do ip netns delete "$n" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

part "part 1: several networks in one ADD (braid-cnitool runs the conflist)"
step "creating throwaway namespaces $host (the node) and $ctr (the pod)"
netns_add "$host" "$ctr"

cat > "$work/demo.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "braid-demo",
  "plugins": [
$(delegator "$work" braiddemo0 20 0.4.0 21),
    {"type": "tuning", "mtu": 1400},
    {"type": "verifier"}
  ]
}
JSON
echo "conflist: the delegator attaches a bridge network (eth0, cniVersion 1.0.0) and a ptp network"
echo "(net1, cniVersion 0.4.0) and returns both merged as one result (1.0.0: Debian's tuning, which runs after it, speaks up to 1.0.0);"
echo "the verifier, last, proves with netlink that the final result matches the pod's namespace:"
cat "$work/demo.conflist"

tool() { cnitool "$1" "$host" "$ctr" "$work/demo.conflist" "$id" "$work"; }

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
if [ -n "$(taps "$ctr"; taps "$host")" ]; then echo "a tap is left"; left=1; fi
files="$(files_left "$work")"
[ -z "$files" ] || { echo "$files"; left=1; }
[ "$left" -eq 0 ] || exit 1
echo "no interface, no IP reservation, no state or cache file left (bridge leaves its bridge device on the node by design; it goes with the node namespace)"

part "part 2: a Kubernetes node (containerd's CRI, braid-install, an annotated pod)"
step "containerd's CRI in a throwaway namespace $node, a bridge cluster network"
netns_add "$node"
# The example "storage" network's macvlan master, in the node namespace only.
ip -n "$node" link add eth1 type veth peer name eth1p
ip -n "$node" link set eth1 up
mkdir -p "$k"/{net.d,cni-bin,braid.d,ipam,configmap,image/rootfs/bin}
for p in /usr/lib/cni/*; do ln -s "$p" "$k/cni-bin/"; done
cat > "$k/net.d/10-cluster.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "cluster", "plugins": [
  {"type": "bridge", "bridge": "cluster0", "isGateway": true,
   "ipam": {"type": "host-local", "dataDir": "$k/ipam", "ranges": [[{"subnet": "198.18.30.0/24"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "tuning", "capabilities": {"mac": true}}]}
JSON
cat > "$k/config.toml" <<TOML
version = 2
root = "$k/root"
state = "$k/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$k/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/braid-demo-sandbox:1"
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$k/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$k/cni-bin"
    conf_dir = "$k/net.d"
    max_conf_num = 1
TOML
nsenter --net="/run/netns/$node" containerd --config "$k/config.toml" </dev/null >"$k/containerd.log" 2>&1 &
cd_pid=$!   # nsenter execs containerd: this is the daemon's PID
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "containerd did not start:" >&2; cat "$k/containerd.log" >&2; exit 1; }
# The pod's sandbox ("pause") image: static busybox sleeping, built here and imported (no registry).
cp /bin/busybox "$k/image/rootfs/bin/busybox"
ln -s busybox "$k/image/rootfs/bin/sleep"
tar -C "$k/image/rootfs" -cf "$k/image/layer.tar" .
digest="$(sha256sum "$k/image/layer.tar" | cut -d' ' -f1)"
cat > "$k/image/config.json" <<JSON
{"architecture": "amd64", "os": "linux", "config": {"Entrypoint": ["/bin/sleep"], "Cmd": ["2147483647"]},
 "rootfs": {"type": "layers", "diff_ids": ["sha256:$digest"]}}
JSON
echo '[{"Config": "config.json", "RepoTags": ["localhost/braid-demo-sandbox:1"], "Layers": ["layer.tar"]}]' > "$k/image/manifest.json"
tar -C "$k/image" -cf "$k/sandbox.tar" manifest.json config.json layer.tar
ctr --address "$sock" -n k8s.io images import "$k/sandbox.tar" >/dev/null
cri wait-network cluster
echo "containerd (PID $cd_pid) runs pods on the cluster network ($k/net.d/10-cluster.conflist: bridge, 198.18.30.0/24)"

step "the example ConfigMap (deploy/kubernetes/base/networks-configmap.json) as the kubelet mounts it: keys behind a ..data symlink"
# host-local's reservations go into the demo's directory (not /var/lib/cni/networks); nothing else changes.
mkdir "$k/configmap/..v1"
for key in $(jq -r '.data | keys[]' deploy/kubernetes/base/networks-configmap.json); do
  jq -r --arg k "$key" '.data[$k]' deploy/kubernetes/base/networks-configmap.json \
    | jq --arg d "$k/ipam" '.plugins |= map(if .ipam then .ipam.dataDir = $d else . end)' > "$k/configmap/..v1/$key"
  ln -s "..data/$key" "$k/configmap/$key"
done
ln -s ..v1 "$k/configmap/..data"
ls -lA "$k/configmap" | sed 1d

step "braid-install --once: plugins into the CNI bin dir, the ConfigMap mirrored, 00-braid.conflist over the primary"
"$bin/braid-install" --once --host-root / --source-dir "$bin" --wait 20 \
  --cni-bin-dir "$k/cni-bin" --cni-conf-dir "$k/net.d" --networks-dir "$k/braid.d" \
  --state-dir "$k/braid-state" --status-dir "$k/status" --networks-configmap "$k/configmap"
cri wait-network braid
echo "containerd reloaded its CNI configuration: pods now start through braid"
cat "$k/net.d/00-braid.conflist"
(cd "$k/braid.d" && find . -name '*.conflist' | sort)

step "a pod in namespace default annotated k8s.v1.cni.cncf.io/networks: isolated, storage (RunPodSandbox)"
t0=$EPOCHREALTIME
pod="$(cri runp default/web "k8s.v1.cni.cncf.io/networks=isolated, storage")"
echo "$pod" > "$k/pods"
ms=$(( (${EPOCHREALTIME//[.,]/} - ${t0//[.,]/}) / 1000 ))   # µs → ms (the separator follows the locale)
echo "sandbox ${pod:0:12} ready in $ms ms; its pod IP (the cluster network's: what Kubernetes sees): $(cri ips "$pod" | paste -sd' ')"
netns="$(cri netns "$pod")"
status="$k/status/default_web_$pod.json"
step "the pod's interfaces (ip -br -4 addr in its namespace) beside the network-status braid wrote"
echo "(<statusDir>/<namespace>_<pod>_<sandbox ID>.json: $status)"
addrs="$(nsenter --net="$netns" ip -br -4 addr)"
while read -r ifname _ addr; do
  ifname="${ifname%@*}"
  [ "$ifname" = lo ] && continue
  entry="$(jq -c --arg i "$ifname" '.networkStatus[] | select(.interface == $i) | {name, ips, default}' "$status")"
  printf '%-5s %-18s | %s\n' "$ifname" "$addr" "${entry:-(not in the network-status)}"
done <<<"$addrs"
ok=1
for want in "eth0 198.18.30." "net1 198.18.100." "net2 198.19.10."; do
  set -- $want
  grep -Eq "^$1[@ ].* ${2//./\\.}" <<<"$addrs" || { echo "the pod has no $1 with an address in $2*" >&2; ok=0; }
done
for want in "net1 default/isolated" "net2 default/storage"; do
  set -- $want
  jq -e --arg i "$1" --arg n "$2" 'any(.networkStatus[]; .interface == $i and .name == $n)' "$status" >/dev/null \
    || { echo "the network-status lacks $2 on $1" >&2; ok=0; }
done
[ "$ok" -eq 1 ] || { echo "the pod did not get its networks; containerd's log: $k/containerd.log" >&2; tail -20 "$k/containerd.log" >&2; exit 1; }
echo "eth0 is the cluster network; net1 and net2 are the ConfigMap's isolated (bridge) and storage (macvlan on eth1)"

step "the pod is removed (StopPodSandbox, RemovePodSandbox), containerd stopped"
cri stopp "$pod"
cri rmp "$pod"
left=0
[ -e "$netns" ] && { echo "the pod's network namespace is left: $netns"; left=1; }
[ -n "$(ls -A "$k/state/io.containerd.grpc.v1.cri/netns" 2>/dev/null)" ] && { echo "a pod namespace is left"; left=1; }
find "$k/ipam" -name '198.1*' | grep -q . && { echo "an IP reservation is left"; left=1; }
find "$k/braid-state" "$k/status" -type f ! -name .braid-owner | grep -q . && { echo "braid state or status is left"; left=1; }
ls /var/lib/cni/results/ 2>/dev/null | grep -q -- "-$pod-" && { echo "a libcni cache entry is left"; left=1; }
ip -n "$node" -br link | grep -Eq '^(veth|net|mac)' && { echo "a pod interface is left on the node"; left=1; }
[ -n "$(taps "$node")" ] && { echo "a tap is left on the node"; left=1; }
shim="$shims/$(printf '%s/k8s.io/%s' "$sock" "$pod" | sha256sum | cut -d' ' -f1)"
[ -e "$shim" ] && { echo "the shim socket is left"; left=1; }
stop_node
pgrep -f -- "$sock" >/dev/null && { echo "a containerd process is left"; left=1; }
awk -v p="$work/" 'index($5, p) == 1' /proc/self/mountinfo | grep -q . && { echo "a mount is left"; left=1; }
[ "$left" -eq 0 ] || exit 1
echo "no pod namespace, interface, IP reservation, braid state or network-status, libcni cache entry, shim,"
echo "mount or containerd process left (braid's conflist stays, as on a node; it goes with the demo's directory)"

part "part 3: a VM gets all three networks (vmtap hands the pod interfaces to QEMU)"
t3=$EPOCHREALTIME
v="$work/vm"
mkdir -p "$v"
step "creating throwaway namespaces $vmhost (the node) and $vmpod (the VM's pod)"
netns_add "$vmhost" "$vmpod"
# The macvlan network's master, eth1, and on it a peer holding that network's gateway address.
ip -n "$vmhost" link add eth1 type veth peer name eth1p
ip -n "$vmhost" link add metal0 link eth1 type macvlan mode bridge
ip -n "$vmhost" addr add 198.18.42.1/24 dev metal0
for l in eth1 eth1p metal0; do ip -n "$vmhost" link set "$l" up; done
metal="{
          \"cniVersion\": \"1.0.0\", \"name\": \"metal\", \"type\": \"macvlan\", \"master\": \"eth1\", \"mode\": \"bridge\",
          \"ipam\": {
            \"type\": \"host-local\", \"dataDir\": \"$v/ipam\",
            \"ranges\": [[{\"subnet\": \"198.18.42.0/24\", \"gateway\": \"198.18.42.1\"}]]
          }
        }"
cat > "$v/vm.conflist" <<JSON
{
  "cniVersion": "1.1.0",
  "name": "braid-demo-vm",
  "plugins": [
$(delegator "$v" braidvm0 40 1.0.0 41 "$metal"),
    {"type": "vmtap"},
    {"type": "verifier"}
  ]
}
JSON
echo "conflist: the delegator attaches bridge (eth0), ptp (net1) and macvlan (net2, on eth1) and merges their results;"
echo "vmtap then gives every pod interface a tap joined to it by two tc redirects and adds, per interface, the tap"
echo "and a VM interface (sandbox = the container ID, MAC = the pod interface's) to the result; the verifier checks it all:"
cat "$v/vm.conflist"
vmtool() { cnitool "$1" "$vmhost" "$vmpod" "$v/vm.conflist" "$vmid" "$v"; }
step "ADD: braid's result (pod interfaces, then per pod interface its tap and the VM interface with its IPs)"
vmtool add > "$v/result.json"
cat "$v/result.json"
step "the pod namespace: the pod interfaces and their taps, each pair joined by tc redirects"
ip -n "$vmpod" -br link
for l in eth0 net1 net2; do
  printf '%s ingress -> ' "$l"
  tc -n "$vmpod" filter show dev "$l" ingress | grep -o 'Redirect to device [^)]*' | head -n1
done
step "the VM: braid-vm boots QEMU in $vmpod on the result above, one virtio NIC per VM interface"
TMPDIR="$v" "$braid_vm" --netns "/run/netns/$vmpod" --container-id "$vmid" "$v/result.json"
step "CHECK (the verifier also checks each tap's redirects, both ways)"
vmtool check && echo "CHECK passed"
step "DEL"
vmtool del && echo "DEL passed"
step "proof that nothing is left"
left=0
[ "$(ip -n "$vmpod" -o link show | awk -F': ' '{print $2}')" = lo ] || { echo "a link is left in the pod: $(ip -n "$vmpod" -br link)"; left=1; }
[ -n "$(taps "$vmpod"; taps "$vmhost")" ] && { echo "a tap is left: $(taps "$vmpod"; taps "$vmhost")"; left=1; }
ip -n "$vmhost" -br link | grep -q '^veth' && { echo "a veth is left on the node"; left=1; }
[ -n "$(ip netns pids "$vmpod")" ] && { echo "a process (QEMU?) is left in the pod namespace"; left=1; }
files="$(files_left "$v")"
[ -z "$files" ] || { echo "$files"; left=1; }
find "$v" -maxdepth 1 -name 'braid-*' | grep -q . && { echo "a VM boot directory is left"; left=1; }
[ "$left" -eq 0 ] || exit 1
echo "no tap, pod interface, QEMU, IP reservation, state, cache file or boot file left"
echo "part 3 took $(( (${EPOCHREALTIME//[.,]/} - ${t3//[.,]/}) / 1000000 )) s"

step "demo finished"
