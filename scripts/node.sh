#!/usr/bin/env bash
# A real Kubernetes on this machine, in namespaces of its own, with braid installed by its
# manifests: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, and per node
# containerd, kubelet and kube-proxy — built from the Go modules under integration/node/ by
# scripts/build-node.sh (once per machine).
#
# Usage (as root):
#   scripts/node.sh up [NODES]      start a cluster of NODES nodes (default 1), install braid
#                                   (`kubectl apply -k deploy/kubernetes/crd`, then
#                                   `kubectl apply -k deploy/kubernetes`), wait for its agents;
#                                   prints the environment to use it (KUBECONFIG, PATH)
#   scripts/node.sh down            stop everything, remove everything it made
#   scripts/node.sh env             the environment again (KUBECONFIG, PATH to kubectl)
#   scripts/node.sh kubectl ARGS…   kubectl against the cluster
#   scripts/node.sh exec NODE CMD…  run CMD in NODE's namespaces (network and mount), e.g.
#                                   `exec node1 ls /etc/cni/net.d`
#   scripts/node.sh stop|start|restart PART
#                                   one part by name: etcd, kube-apiserver,
#                                   kube-controller-manager, kube-scheduler, and per node
#                                   containerd-nodeN, kubelet-nodeN, kube-proxy-nodeN
#   scripts/node.sh deviceplugin NODE [ARGS…]
#                                   starts braid's test device plugin (integration/node/deviceplugin)
#                                   on NODE as the part deviceplugin-NODE, registered with that
#                                   node's kubelet (ARGS: its flags, e.g. `-resource
#                                   braid.test/fakevf -count 4`); `stop deviceplugin-NODE` stops
#                                   it by its PID, `down` too. A kubelet restarted forgets its
#                                   device plugins: `restart deviceplugin-NODE` registers again
#   scripts/node.sh dradriver NODE [ARGS…]
#                                   starts braid's test DRA driver (integration/node/dradriver,
#                                   built by scripts/build-dradriver.sh) on NODE as the part
#                                   dradriver-NODE, registered with that node's kubelet, its
#                                   ResourceSlice published, and applies the DeviceClass of its
#                                   name (selector device.driver == NAME; ARGS: its flags, e.g.
#                                   `-resource braid.test/dravf -count 4`; driver name
#                                   dra.braid.test unless `-driver NAME`); `stop dradriver-NODE`
#                                   stops it by its PID (it deletes its slices), `down` too
#   scripts/node.sh compact         compacts etcd at its current revision (what makes a watch
#                                   resumed from before it answer 410 Gone)
#   scripts/node.sh image TAG DIR ENTRYPOINT
#                                   makes a one-layer image TAG of directory DIR (ENTRYPOINT: a
#                                   JSON list) and imports it into every node's containerd, as
#                                   the cluster's own images are (the node bench's Multus image)
#
# Environment:
#   BRAID_NODE_DIR     the cluster's directory (default /var/lib/braid/node): certificates,
#                      tokens, kubeconfigs, logs (logs/), the API server's audit log
#                      (logs/audit.log), each node's files
#   BRAID_RELEASE_DIR  braid's static binaries (default: scripts/build-release.sh builds them)
#
# What it never touches: the machine's own network namespace, /etc/cni, /opt/cni,
# /var/lib/kubelet, /var/lib/containerd, /var/lib/cni, /var/lib/braid/claims,
# /var/lib/braid/dra-devices, /run. Each node is a network namespace
# (uplink 198.18.0.N/24 on a bridge in a namespace of its own, pods in 198.18.(64+N).0/24,
# Services in 198.18.200.0/24) and a mount namespace in which those paths, /run and the
# kernel tunables the kubelet writes (kernel.panic, kernel.panic_on_oops,
# vm.overcommit_memory: not namespaced) are files of its own under BRAID_NODE_DIR. The
# kubelet's cgroups are below /braid-<cluster>-nodeN (<cluster>: the directory's name, so two
# clusters never share one). The API server is reachable only from inside the
# nodes' network namespaces: the kubectl this prints enters node1's.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"

D="${BRAID_NODE_DIR:-/var/lib/braid/node}"
NS="$D/ns"
SERVICE_CIDR=198.18.200.0/24
SERVICE_IP=198.18.200.1
API=198.18.0.1

log() { printf '== node: %s\n' "$*" >&2; }
die() { printf 'node.sh: %s\n' "$*" >&2; exit 1; }

node_ip() { echo "198.18.0.$1"; }
pod_cidr() { echo "198.18.$((64 + $1)).0/24"; }
nodes() { cat "$D/nodes" 2>/dev/null || echo 0; }
# Node N's cgroup, below the root of every hierarchy.
cgroup() { local b; b="$(basename "$D")"; echo "braid-${b//[^A-Za-z0-9-]/-}-node$1"; }

# Runs a command in node N's namespaces (node 1 also holds the control plane).
in_node() {
  local n="$1"; shift
  nsenter --net="$NS/node$n.net" --mount="$NS/node$n.mnt" -- "$@"
}

bin_dir() { cat "$D/bin-dir"; }
# The reference plugins every node runs (containernetworking/plugins, integration/cni-plugins).
cni_plugins_dir() { cat "$D/cni-plugins-dir"; }

# --- parts ---------------------------------------------------------------------------------

# Writes PART's command line to run/PART.sh (the node it runs in, then its arguments) so that
# start/restart run it again exactly.
define() {
  local part="$1" n="$2"; shift 2
  mkdir -p "$D/run"
  {
    printf 'node=%s\n' "$n"
    printf 'cmd=('; printf '%q ' "$@"; printf ')\n'
  } > "$D/run/$part.sh"
}

start() {
  local part="$1" node cmd
  [ -f "$D/run/$part.sh" ] || die "no part named $part (see run/ in $D)"
  if running "$part"; then return 0; fi
  # shellcheck disable=SC1090
  node="$(sed -n 's/^node=//p' "$D/run/$part.sh")"
  eval "$(grep '^cmd=' "$D/run/$part.sh")"
  mkdir -p "$D/logs" "$D/pids"
  # setsid: the part outlives this script and the shell that ran it; nsenter execs the part,
  # so $! is the part's own PID.
  PATH="$(bin_dir):$PATH" setsid nsenter --net="$NS/node$node.net" --mount="$NS/node$node.mnt" -- \
    "${cmd[@]}" >> "$D/logs/$part.log" 2>&1 < /dev/null &
  echo $! > "$D/pids/$part"
}

running() {
  local pid
  pid="$(cat "$D/pids/$1" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

stop() {
  local part="$1" pid i
  pid="$(cat "$D/pids/$part" 2>/dev/null)" || return 0
  if [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; then
    for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$D/pids/$part"
}

# Waits up to $1 seconds for the command after it to succeed.
until_ok() {
  local secs="$1" i; shift
  for i in $(seq 1 $((secs * 2))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  return 1
}

kubectl_() { nsenter --net="$NS/node1.net" -- "$(bin_dir)/kubectl" --kubeconfig="$D/kubeconfig" "$@"; }

# --- certificates, tokens, kubeconfigs -----------------------------------------------------

pki() {
  local p="$D/pki"
  mkdir -p "$p"
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=braid-node-ca" \
    -keyout "$p/ca.key" -out "$p/ca.crt" 2>/dev/null
  # The API server's serving certificate: its address, the kubernetes Service's, its names.
  cert apiserver "/CN=kube-apiserver" \
    "subjectAltName=IP:$API,IP:$SERVICE_IP,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost"
  # What the API server shows a kubelet (logs, exec): system:masters may reach every node.
  cert apiserver-kubelet-client "/CN=kube-apiserver-kubelet-client/O=system:masters" ""
  openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
  openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
}

cert() {
  local name="$1" subj="$2" ext="$3" p="$D/pki"
  openssl req -newkey rsa:2048 -nodes -subj "$subj" -keyout "$p/$name.key" -out "$p/$name.csr" 2>/dev/null
  if [ -n "$ext" ]; then
    openssl x509 -req -in "$p/$name.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 30 \
      -extfile <(echo "$ext") -out "$p/$name.crt" 2>/dev/null
  else
    openssl x509 -req -in "$p/$name.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 30 \
      -out "$p/$name.crt" 2>/dev/null
  fi
  rm -f "$p/$name.csr"
}

# Static bearer tokens (kube-apiserver --token-auth-file) for the control plane's own clients
# and the nodes: the users and groups kubeadm's certificates carry, so the bootstrap RBAC
# bindings, the Node authorizer and NodeRestriction treat them exactly as on any cluster.
tokens() {
  local n
  : > "$D/tokens.csv"
  token admin admin "system:masters"
  token kube-controller-manager system:kube-controller-manager ""
  token kube-scheduler system:kube-scheduler ""
  token kube-proxy system:kube-proxy ""
  for n in $(seq 1 "$(nodes)"); do token "node$n" "system:node:node$n" "system:nodes"; done
}

token() {
  local name="$1" user="$2" groups="$3" t
  t="$(openssl rand -hex 24)"
  printf '%s,%s,%s,"%s"\n' "$t" "$user" "$user" "$groups" >> "$D/tokens.csv"
  kubeconfig "$D/kubeconfigs/$name" "$t"
}

kubeconfig() {
  local file="$1" token="$2"
  mkdir -p "$(dirname "$file")"
  cat > "$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: braid-node
  cluster:
    server: https://$API:6443
    certificate-authority: $D/pki/ca.crt
users:
- name: user
  user:
    token: $token
contexts:
- name: braid-node
  context: {cluster: braid-node, user: user}
current-context: braid-node
EOF
  chmod 600 "$file"
}

# --- namespaces ----------------------------------------------------------------------------

# The nodes' wire: a bridge in a network namespace of its own; node N's uplink is a veth into it.
network() {
  local n count="$1"
  mkdir -p "$NS"
  # Namespace files must sit on a private mount (unshare --net=FILE / --mount=FILE).
  # -n: no record in the machine's /run/mount/utab either.
  mount -n --bind "$NS" "$NS"
  mount -n --make-private "$NS"
  touch "$NS/wire.net"
  unshare --net="$NS/wire.net" true
  nsenter --net="$NS/wire.net" sh -c 'ip link set lo up && ip link add wire type bridge && ip link set wire up'
  for n in $(seq 1 "$count"); do
    touch "$NS/node$n.net" "$NS/node$n.mnt"
    unshare --net="$NS/node$n.net" true
    nsenter --net="$NS/node$n.net" ip link set lo up
    # Made inside the node's namespace, its peer moved by the wire namespace's file: nothing
    # ever exists, even for a moment, in the machine's own namespace.
    nsenter --net="$NS/node$n.net" ip link add uplink type veth peer name "n$n" netns "$NS/wire.net"
    nsenter --net="$NS/wire.net" sh -c "ip link set n$n master wire && ip link set n$n up"
    nsenter --net="$NS/node$n.net" sh -c "ip addr add $(node_ip "$n")/24 dev uplink && ip link set uplink up && ip route add default dev uplink"
    # The node's second NIC (a veth: this kernel has no dummy links), the master of the
    # example "storage" network (macvlan on eth1).
    nsenter --net="$NS/node$n.net" sh -c "ip link add eth1 type veth peer name eth1-peer && ip link set eth1 up && ip link set eth1-peer up"
  done
  # Each node reaches the others' pods through their uplinks.
  for n in $(seq 1 "$count"); do
    for m in $(seq 1 "$count"); do
      [ "$n" = "$m" ] || nsenter --net="$NS/node$n.net" ip route add "$(pod_cidr "$m")" via "$(node_ip "$m")"
    done
  done
}

# Node N's mount namespace: its own /run, CNI, kubelet, containerd and log directories, and
# files standing in for the non-namespaced kernel tunables the kubelet sets.
mounts() {
  local n="$1" r="$D/node$n"
  mkdir -p "$r"/{etc-cni,opt-cni,kubelet,containerd,var-lib-cni,braid-claims,braid-dra-devices,log-pods,log-containers,sysctl}
  mkdir -p "$r/etc-cni/net.d" "$r/etc-cni/multus/net.d" "$r/opt-cni/bin"
  echo 10 > "$r/sysctl/kernel.panic"
  echo 1 > "$r/sysctl/kernel.panic_on_oops"
  echo 1 > "$r/sysctl/vm.overcommit_memory"
  unshare --mount="$NS/node$n.mnt" --propagation private sh -euc "
    mount -t tmpfs -o mode=0755 braid-node$n-run /run
    mount --bind '$r/etc-cni' /etc/cni
    mkdir -p /opt/cni && mount --bind '$r/opt-cni' /opt/cni
    mkdir -p /var/lib/kubelet && mount --bind '$r/kubelet' /var/lib/kubelet
    mkdir -p /var/lib/containerd && mount --bind '$r/containerd' /var/lib/containerd
    mkdir -p /var/lib/cni && mount --bind '$r/var-lib-cni' /var/lib/cni
    # braid's DRA claim records (/var/lib/braid/claims, deploy/kubernetes-dra): each node its own.
    mkdir -p /var/lib/braid/claims && mount --bind '$r/braid-claims' /var/lib/braid/claims
    # braid's record of the node's DRA devices (/var/lib/braid/dra-devices, the agent's
    # --dra-devices-file): each node its own, as each node's slices are.
    mkdir -p /var/lib/braid/dra-devices && mount --bind '$r/braid-dra-devices' /var/lib/braid/dra-devices
    mkdir -p /var/log/pods && mount --bind '$r/log-pods' /var/log/pods
    mkdir -p /var/log/containers && mount --bind '$r/log-containers' /var/log/containers
    mount --bind '$r/sysctl/kernel.panic' /proc/sys/kernel/panic
    mount --bind '$r/sysctl/kernel.panic_on_oops' /proc/sys/kernel/panic_on_oops
    mount --bind '$r/sysctl/vm.overcommit_memory' /proc/sys/vm/overcommit_memory
    # Shared within the node, as systemd makes a host's mounts: a container that mounts the
    # node's root with HostToContainer (braid's hot-plug layout) sees pod namespaces mounted
    # after it started, and hostPath volumes with Bidirectional or HostToContainer propagation
    # (Multus's DaemonSets, in the node bench) need it. The namespace was made private above,
    # so nothing propagates to the machine's.
    mount --make-rshared /
  "
}

cgroups() {
  local n="$1" c
  for c in /sys/fs/cgroup/*/; do
    if [ "$(basename "$c")" != unified ]; then mkdir -p "$c/$(cgroup "$n")"; fi
  done
}

# --- images --------------------------------------------------------------------------------

# A one-layer image archive (docker-archive: what `ctr images import` and `podman load` read).
image() {
  local tag="$1" rootfs="$2" entrypoint="$3" out="$4" w digest
  w="$(mktemp -d)"
  tar -C "$rootfs" -cf "$w/layer.tar" .
  digest="$(sha256sum "$w/layer.tar" | cut -d' ' -f1)"
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$entrypoint" "$digest" > "$w/config.json"
  printf '[{"Config":"config.json","RepoTags":["%s"],"Layers":["layer.tar"]}]' "$tag" > "$w/manifest.json"
  tar -C "$w" -cf "$out" manifest.json config.json layer.tar
  rm -rf "$w"
}

images() {
  local i="$D/images" r
  mkdir -p "$i"
  r="$(mktemp -d)"
  cp "$(bin_dir)/pause" "$r/pause"
  image localhost/braid/pause:1 "$r" '["/pause"]' "$i/pause.tar"
  rm -rf "$r"
  # The test pods' image: static busybox (its `ip` shows a pod's interfaces from inside).
  r="$(mktemp -d)"
  mkdir -p "$r/bin" "$r/tmp"
  cp /bin/busybox "$r/bin/busybox"
  for a in sh ip sleep cat ls ps wget nc ping sed grep; do ln -s busybox "$r/bin/$a"; done
  image localhost/braid/busybox:1 "$r" '["/bin/sh"]' "$i/busybox.tar"
  rm -rf "$r"
  # braid's own image, built as an operator builds it (scripts/build-image.sh), with a podman
  # whose storage and run directories are the cluster's.
  local p="$D/podman"
  mkdir -p "$p/root" "$p/run" "$p/tmp"
  local podman="podman --root $p/root --runroot $p/run --tmpdir $p/tmp --storage-driver vfs --cgroup-manager cgroupfs --events-backend none"
  BRAID_TAG="$(PODMAN="$podman" bash scripts/build-image.sh | tail -n1)"
  # shellcheck disable=SC2086
  $podman save --format docker-archive -o "$i/braid.tar" "$BRAID_TAG" 2>/dev/null
  echo "$BRAID_TAG" > "$i/braid.tag"
}

# Makes an image of a directory and imports it into every node's containerd.
import_image() {
  local tag="$1" dir="$2" entrypoint="$3" n b w
  [ -e "$D/nodes" ] || die "no cluster in $D (scripts/node.sh up)"
  b="$(bin_dir)"
  w="$(mktemp -d)"
  image "$tag" "$dir" "$entrypoint" "$w/image.tar"
  for n in $(seq 1 "$(nodes)"); do
    if [ "$(runtime_of "$n")" = crio ]; then crio_import "$n" "$tag" "$w/image.tar" >/dev/null; continue; fi
    in_node "$n" "$b/ctr" --address /run/containerd/containerd.sock -n k8s.io images import "$w/image.tar" >/dev/null
  done
  rm -rf "$w"
  echo "$tag"
}

# --- the control plane ---------------------------------------------------------------------

control_plane() {
  local b
  b="$(bin_dir)"
  mkdir -p "$D/etcd" "$D/logs"
  cat > "$D/audit-policy.yaml" <<'EOF'
# Every request's metadata, by user: what the suite counts (requests per node and per pod).
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
EOF
  define etcd 1 "$b/etcd" --name default --data-dir "$D/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster default=http://127.0.0.1:2380 --log-level warn
  define kube-apiserver 1 "$b/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 --advertise-address=$API --secure-port=6443 \
    --tls-cert-file="$D/pki/apiserver.crt" --tls-private-key-file="$D/pki/apiserver.key" \
    --client-ca-file="$D/pki/ca.crt" --token-auth-file="$D/tokens.csv" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$D/pki/sa.pub" --service-account-signing-key-file="$D/pki/sa.key" \
    --service-cluster-ip-range=$SERVICE_CIDR --allow-privileged=true \
    --kubelet-client-certificate="$D/pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$D/pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP \
    --audit-policy-file="$D/audit-policy.yaml" --audit-log-path="$D/logs/audit.log" \
    --audit-log-format=json --audit-log-mode=blocking --profiling=false
  define kube-controller-manager 1 "$b/kube-controller-manager" \
    --kubeconfig="$D/kubeconfigs/kube-controller-manager" \
    --authentication-kubeconfig="$D/kubeconfigs/kube-controller-manager" \
    --authorization-kubeconfig="$D/kubeconfigs/kube-controller-manager" \
    --service-account-private-key-file="$D/pki/sa.key" --root-ca-file="$D/pki/ca.crt" \
    --use-service-account-credentials=true --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=10257 --controllers='*'
  define kube-scheduler 1 "$b/kube-scheduler" \
    --kubeconfig="$D/kubeconfigs/kube-scheduler" \
    --authentication-kubeconfig="$D/kubeconfigs/kube-scheduler" \
    --authorization-kubeconfig="$D/kubeconfigs/kube-scheduler" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port=10259
  start etcd
  until_ok 60 in_node 1 curl -sf http://127.0.0.1:2379/health || die "etcd did not come up: $D/logs/etcd.log"
  start kube-apiserver
  until_ok 120 kubectl_ get --raw /readyz || die "kube-apiserver did not become ready: $D/logs/kube-apiserver.log"
  start kube-controller-manager
  start kube-scheduler
}

# --- nodes ---------------------------------------------------------------------------------

node() {
  local n="$1" b r="$D/node$n"
  b="$(bin_dir)"
  # The cluster network: the reference bridge plugin, host-local addresses from the node's
  # pod range (what braid's installer finds as the primary and delegates to by name).
  cp "$(cni_plugins_dir)"/* "$r/opt-cni/bin/"
  cat > "$r/etc-cni/net.d/10-cluster.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "cluster",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$(pod_cidr "$n")"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}}
  ]
}
EOF
  cat > "$r/containerd.toml" <<EOF
version = 3
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "localhost/braid/pause:1"
# Root here lacks CAP_SYS_RESOURCE (the sandbox these machines run in drops it): no process
# may lower its oom_score_adj, and runc fails every container whose score the kubelet sets
# below containerd's own ("failed to update /proc/self/oom_score_adj: Permission denied").
# containerd then raises such scores to its own instead.
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ["/opt/cni/bin"]
  conf_dir = "/etc/cni/net.d"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = "$(command -v runc)"
[plugins.'io.containerd.nri.v1.nri']
  disable = true
EOF
  : > "$r/resolv.conf"
  cat > "$r/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$D/pki/ca.crt"}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: /$(cgroup "$n")
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$(runtime_socket "$n")
address: $(node_ip "$n")
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
resolvConf: "$r/resolv.conf"
clusterDomain: cluster.local
# Imported images cannot be pulled again: never collect them, never evict for disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
serializeImagePulls: false
rotateCertificates: false
# Static pods (integration/tests/kube_node.rs writes manifests here): a directory of the node's
# own, never the machine's /etc/kubernetes/manifests.
staticPodPath: "$r/manifests"
EOF
  mkdir -p "$r/manifests"
  if [ "$(runtime_of "$n")" = containerd ]; then define "containerd-node$n" "$n" "$b/containerd" --config "$r/containerd.toml"; fi
  define "kubelet-node$n" "$n" "$b/kubelet" --config="$r/kubelet.yaml" \
    --kubeconfig="$D/kubeconfigs/node$n" --hostname-override="node$n" --node-ip="$(node_ip "$n")" --v=2
  # conntrack limits are not namespaced: kube-proxy leaves them alone with these zeros.
  define "kube-proxy-node$n" "$n" "$b/kube-proxy" --kubeconfig="$D/kubeconfigs/kube-proxy" \
    --hostname-override="node$n" --proxy-mode=iptables --cluster-cidr=198.18.64.0/18 \
    --conntrack-max-per-core=0 --conntrack-min=0 --conntrack-tcp-timeout-established=0 \
    --conntrack-tcp-timeout-close-wait=0 --metrics-bind-address=127.0.0.1:10249 \
    --healthz-bind-address=127.0.0.1:10256
  if [ "$(runtime_of "$n")" = crio ]; then
    crio_node "$n"
  else
    start "containerd-node$n"
    until_ok 60 in_node "$n" test -S /run/containerd/containerd.sock || die "containerd on node$n did not come up: $D/logs/containerd-node$n.log"
    local t
    for t in pause busybox braid; do
      in_node "$n" "$b/ctr" --address /run/containerd/containerd.sock -n k8s.io images import "$D/images/$t.tar" >/dev/null
    done
  fi
  start "kubelet-node$n"
  start "kube-proxy-node$n"
}

# --- CRI-O (node2) ---------------------------------------------------------------------------

# Which runtime node N runs: CRI-O on node2, containerd on every other node, so that every
# two-node test meets both. BRAID_NODE2_RUNTIME=containerd keeps node2 on containerd.
runtime_of() {
  if [ "$1" = 2 ] && [ "${BRAID_NODE2_RUNTIME:-crio}" = crio ]; then echo crio; else echo containerd; fi
}
crio_dir() { cat "$D/crio-dir"; }
runtime_socket() {
  if [ "$(runtime_of "$1")" = crio ]; then echo /run/crio/crio.sock; else echo /run/containerd/containerd.sock; fi
}

# Imports an image archive (docker-archive) into node N's CRI-O storage with CRI-O's own
# copyimg (the same containers/storage code crio reads it with).
crio_import() {
  local n="$1" tag="$2" tar="$3" r="$D/node$1"
  in_node "$n" "$(crio_dir)/copyimg" --root "$r/crio/storage" --runroot /run/containers/storage \
    --storage-driver overlay --signature-policy "$r/crio/policy.json" \
    --image-name "$tag" --import-from "docker-archive:$tar"
}

# Node N's CRI-O: its storage, state and configuration below the node's directory and /run.
crio_node() {
  local n="$1" r="$D/node$1" t
  mkdir -p "$r/crio/storage" "$r/crio/lib"
  echo '{"default":[{"type":"insecureAcceptAnything"}]}' > "$r/crio/policy.json"
  # Debian's runc behind a wrapper that does, in the bundle's config.json before `runc create`,
  # the two things containerd does itself and CRI-O does not:
  # - root here lacks CAP_SYS_RESOURCE, so runc fails every container whose oom_score_adj the
  #   kubelet sets below the runtime's own (-997 for system-node-critical pods such as braid's
  #   agent: "nsexec: failed to update /proc/self/oom_score_adj: Permission denied");
  #   containerd's restrict_oom_score_adj raises such a score to its own, and so does this;
  # - this kernel has no hugetlb cgroup hierarchy, and runc fails any container with
  #   hugepageLimits then ("cannot set hugetlb limit: container could not join or create
  #   cgroup"); the kubelet sends them for every page size, containerd drops them when the
  #   controller is absent, and so does this;
  # - a privileged container (braid's hot-plug agent) gets every capability CRI-O knows, and
  #   runc fails to grant one the runtime itself lacks ("unable to apply caps: operation not
  #   permitted": CAP_SYS_RESOURCE here); containerd gives a privileged container the
  #   capabilities of its own bounding set, and so does this.
  cat > "$r/crio/runc" <<EOF
#!/bin/sh
own="\$(cat /proc/self/oom_score_adj)"
hugetlb=false; [ -d /sys/fs/cgroup/hugetlb ] || [ -e /sys/fs/cgroup/cgroup.controllers ] && hugetlb=true
bnd="0x\$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)"
have=
i=0
for c in CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE \
    NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT \
    SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE \
    AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ \
    PERFMON BPF CHECKPOINT_RESTORE; do
  [ \$(( (bnd >> i) & 1 )) -eq 1 ] && have="\$have\${have:+,}\"CAP_\$c\""
  i=\$((i + 1))
done
prev=
for a in "\$@"; do
  if [ "\$prev" = --bundle ] || [ "\$prev" = -b ]; then
    $(command -v jq) -c --argjson own "\$own" --argjson hugetlb "\$hugetlb" --argjson have "[\$have]" \
      '(if (.process.oomScoreAdj // \$own) < \$own then .process.oomScoreAdj = \$own else . end)
       | (if \$hugetlb or (.linux.resources.hugepageLimits == null) then . else del(.linux.resources.hugepageLimits) end)
       | (if .process.capabilities == null then . else .process.capabilities |= map_values(map(select(. as \$c | \$have | index(\$c)))) end)' \
      "\$a/config.json" > "\$a/config.json.braid" && mv "\$a/config.json.braid" "\$a/config.json"
  fi
  prev="\$a"
done
exec $(command -v runc) "\$@"
EOF
  chmod 755 "$r/crio/runc"
  cat > "$r/crio.conf" <<EOF
[crio]
root = "$r/crio/storage"
runroot = "/run/containers/storage"
storage_driver = "overlay"
version_file = "/run/crio/version"
version_file_persist = "$r/crio/lib/version"
clean_shutdown_file = "$r/crio/lib/clean.shutdown"
log_dir = "/var/log/crio/pods"
[crio.api]
listen = "/run/crio/crio.sock"
[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
conmon_cgroup = "pod"
pinns_path = "$(crio_dir)/pinns"
namespaces_dir = "/run/crio/ns"
container_exits_dir = "/run/crio/exits"
container_attach_socket_dir = "/run/crio"
[crio.runtime.runtimes.runc]
runtime_path = "$r/crio/runc"
runtime_type = "oci"
runtime_root = "/run/runc"
monitor_path = "$(command -v conmon)"
[crio.image]
pause_image = "localhost/braid/pause:1"
pause_command = "/pause"
pinned_images = ["localhost/braid/pause:1"]
signature_policy = "$r/crio/policy.json"
[crio.network]
network_dir = "/etc/cni/net.d/"
plugin_dirs = ["/opt/cni/bin/"]
[crio.nri]
enable_nri = false
[crio.metrics]
enable_metrics = false
EOF
  for t in pause busybox braid; do
    crio_import "$n" "$(cat "$D/images/$t.tag" 2>/dev/null || echo "localhost/braid/$t:1")" "$D/images/$t.tar" >/dev/null
  done
  define "crio-node$n" "$n" "$(crio_dir)/crio" --config "$r/crio.conf"
  start "crio-node$n"
  until_ok 60 in_node "$n" test -S /run/crio/crio.sock || die "CRI-O on node$n did not come up: $D/logs/crio-node$n.log"
}

# --- commands ------------------------------------------------------------------------------

up() {
  local count="${1:-1}" n
  [ "$(id -u)" -eq 0 ] || die "needs root (namespaces, mounts, containerd, kubelet)"
  case "$count" in ''|*[!0-9]*) die "up takes a node count, not '$count'";; esac
  [ "$count" -ge 1 ] && [ "$count" -le 8 ] || die "up takes 1 to 8 nodes"
  [ ! -e "$D/nodes" ] || die "a cluster is up in $D already (scripts/node.sh down first)"
  local c
  for c in nsenter unshare ip iptables openssl curl podman runc tar sha256sum jq; do
    command -v "$c" >/dev/null 2>&1 || die "missing $c (scripts/test.sh installs what the node needs)"
  done
  [ -x /bin/busybox ] || die "missing /bin/busybox (Debian's busybox-static)"
  mkdir -p "$D"
  log "building the parts (scripts/build-node.sh; once per machine)"
  bash scripts/build-node.sh | tail -n1 > "$D/bin-dir"
  log "the reference plugins (scripts/build-cni-plugins.sh; once per machine)"
  if [ -n "${BRAID_CNI_PLUGINS:-}" ]; then echo "$BRAID_CNI_PLUGINS"; else bash scripts/build-cni-plugins.sh | tail -n1; fi > "$D/cni-plugins-dir"
  [ -x "$(cni_plugins_dir)/bridge" ] || die "no reference plugins in $(cni_plugins_dir) (scripts/build-cni-plugins.sh)"
  if [ "$count" -ge 2 ] && [ "$(runtime_of 2)" = crio ]; then
    log "CRI-O for node2 (scripts/build-crio.sh; once per machine)"
    bash scripts/build-crio.sh | tail -n1 > "$D/crio-dir"
    command -v conmon >/dev/null 2>&1 || die "missing conmon (Debian's conmon; scripts/test.sh installs it)"
  fi
  echo "$count" > "$D/nodes"
  trap 'echo "node.sh: up failed; logs in $D/logs (scripts/node.sh down removes it)" >&2' ERR
  log "certificates and tokens"
  pki
  tokens
  kubeconfig "$D/kubeconfig" "$(sed -n 's/^\([^,]*\),admin,.*/\1/p' "$D/tokens.csv")"
  mkdir -p "$D/bin"
  cat > "$D/bin/kubectl" <<EOF
#!/bin/sh
# kubectl for the cluster in $D: its API server is reachable from node1's network namespace.
export KUBECONFIG="\${KUBECONFIG:-$D/kubeconfig}"
exec nsenter --net="$NS/node1.net" -- "$(bin_dir)/kubectl" "\$@"
EOF
  chmod 755 "$D/bin/kubectl"
  log "namespaces: $count node(s)"
  network "$count"
  for n in $(seq 1 "$count"); do mounts "$n"; cgroups "$n"; done
  log "images (pause, busybox, braid's by scripts/build-image.sh)"
  images
  log "control plane"
  control_plane
  for n in $(seq 1 "$count"); do
    log "node$n: $(runtime_of "$n"), kubelet, kube-proxy"
    node "$n"
  done
  for n in $(seq 1 "$count"); do
    until_ok 180 kubectl_ get node "node$n" || die "node$n did not register: $D/logs/kubelet-node$n.log"
  done
  kubectl_ wait --for=condition=Ready node --all --timeout=180s >&2 || die "nodes not Ready: $D/logs/kubelet-node*.log"
  until_ok 120 kubectl_ get serviceaccount default -n default || die "no default ServiceAccount: $D/logs/kube-controller-manager.log"
  # As an operator installs it: the NAD CRD first (its own kustomization, which uninstalling
  # braid leaves), established, then braid.
  if [ -d "$REPO/deploy/kubernetes/crd" ]; then
    log "the NetworkAttachmentDefinition CRD: kubectl apply -k deploy/kubernetes/crd"
    kubectl_ apply -k "$REPO/deploy/kubernetes/crd" >&2
    kubectl_ wait --for=condition=Established crd/network-attachment-definitions.k8s.cni.cncf.io --timeout=60s >&2
  fi
  log "braid: kubectl apply -k deploy/kubernetes"
  kubectl_ apply -k "$REPO/deploy/kubernetes" >&2
  kubectl_ -n kube-system rollout status daemonset/braid-install --timeout=300s >&2 \
    || die "braid's DaemonSet did not roll out: kubectl -n kube-system describe pods"
  for n in $(seq 1 "$count"); do
    until_ok 120 in_node "$n" test -f /etc/cni/net.d/00-braid.conflist || die "node$n: no 00-braid.conflist"
  done
  trap - ERR
  log "up: $count node(s)"
  env_
}

env_() {
  [ -e "$D/nodes" ] || die "no cluster in $D (scripts/node.sh up)"
  echo "export KUBECONFIG=$D/kubeconfig PATH=$D/bin:\$PATH  # kubectl enters node1's network namespace"
}

# Every process in one of the cluster's namespaces or cgroups: the parts, the shims, the pods.
cluster_pids() {
  local inodes=() n p f
  for f in "$NS"/*.net "$NS"/*.mnt; do
    if [ -e "$f" ]; then inodes+=("$(stat -L -c %i "$f")"); fi
  done
  for p in /proc/[0-9]*; do
    for f in net mnt; do
      local i
      i="$(stat -L -c %i "$p/ns/$f" 2>/dev/null)" || continue
      for n in "${inodes[@]}"; do
        if [ "$i" = "$n" ]; then basename "$p"; continue 3; fi
      done
    done
  done
  for n in $(seq 1 "$(nodes)"); do
    local g="/sys/fs/cgroup/pids/$(cgroup "$n")"
    cat "$g"/cgroup.procs "$g"/*/cgroup.procs "$g"/*/*/cgroup.procs "$g"/*/*/*/cgroup.procs \
      "$g"/*/*/*/*/cgroup.procs 2>/dev/null || true
  done
}

down() {
  [ "$(id -u)" -eq 0 ] || die "needs root"
  [ -d "$D" ] || { log "nothing in $D"; return 0; }
  local part n i pids
  for part in "$D"/pids/dradriver-node* "$D"/pids/deviceplugin-node* "$D"/pids/kubelet-node* "$D"/pids/kube-proxy-node* "$D"/pids/kube-scheduler "$D"/pids/kube-controller-manager \
    "$D"/pids/kube-apiserver "$D"/pids/etcd "$D"/pids/containerd-node* "$D"/pids/crio-node*; do
    if [ -e "$part" ]; then stop "$(basename "$part")"; fi
  done
  # Shims, containers, pods: every process still in a node's namespaces or cgroups.
  for i in $(seq 1 50); do
    pids="$(cluster_pids | sort -u | tr '\n' ' ')"
    [ -n "${pids// /}" ] || break
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 0.2
  done
  for n in $(seq 1 "$(nodes)"); do
    local c
    for c in /sys/fs/cgroup/*/"$(cgroup "$n")"; do
      if [ -d "$c" ]; then find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
    done
  done
  if mountpoint -q "$NS" 2>/dev/null; then
    for f in "$NS"/*; do umount -n "$f" 2>/dev/null || true; done
    umount -n "$NS" 2>/dev/null || umount -n -l "$NS"
  fi
  # Anything left mounted below the directory (none expected: mounts live in the nodes' own
  # mount namespaces).
  { grep -F " $D/" /proc/self/mounts || true; } | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m"; done
  rm -rf "$D"
  log "down: $D removed"
}

# braid's test device plugin on node N, as a part: defined anew with these flags, started, and
# waited for until it registered with the kubelet. A kubelet just (re)started may refuse the
# registration until its device manager serves (the plugin then exits): started again then,
# for up to a minute.
deviceplugin() {
  local n="${1#node}" part; shift
  [ -e "$D/nodes" ] || die "no cluster in $D (scripts/node.sh up)"
  case "$n" in ''|*[!0-9]*) die "deviceplugin takes a node name (node1…), not '$n'";; esac
  [ "$n" -ge 1 ] && [ "$n" -le "$(nodes)" ] || die "no node$n in $D"
  part="deviceplugin-node$n"
  stop "$part"
  define "$part" "$n" "$(bin_dir)/braid-deviceplugin" -dir /var/lib/kubelet/device-plugins "$@"
  : > "$D/logs/$part.log" 2>/dev/null || true
  local i
  for i in $(seq 1 120); do
    running "$part" || start "$part"
    if grep -q "registered " "$D/logs/$part.log"; then
      cat "$D/pids/$part"
      return 0
    fi
    sleep 0.5
  done
  stop "$part"
  die "the device plugin on node$n did not register: $D/logs/$part.log"
}

# braid's test DRA driver on node N, as a part (with the admin's kubeconfig: test tooling),
# and its DeviceClass: defined anew with these flags, started, and waited for until the
# kubelet registered it and its slice is published. The kubelet's plugin manager finds its
# registration socket (under /var/lib/kubelet/plugins_registry, the node's own) also after a
# kubelet restart: nothing to register again by hand.
dradriver() {
  local n="${1#node}" part driver=dra.braid.test dir a prev=""; shift
  [ -e "$D/nodes" ] || die "no cluster in $D (scripts/node.sh up)"
  case "$n" in ''|*[!0-9]*) die "dradriver takes a node name (node1…), not '$n'";; esac
  [ "$n" -ge 1 ] && [ "$n" -le "$(nodes)" ] || die "no node$n in $D"
  for a in "$@"; do
    if [ "$prev" = -driver ]; then driver="$a"; fi
    prev="$a"
  done
  dir="$(bash scripts/build-dradriver.sh | tail -n1)"
  part="dradriver-node$n"
  stop "$part"
  define "$part" "$n" "$dir/braid-dradriver" -kubeconfig "$D/kubeconfig" -node "node$n" "$@"
  : > "$D/logs/$part.log" 2>/dev/null || true
  printf '{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"%s"},"spec":{"selectors":[{"cel":{"expression":"device.driver == \\"%s\\""}}]}}\n' \
    "$driver" "$driver" | kubectl_ apply -f - >&2
  start "$part"
  local i
  for i in $(seq 1 120); do
    running "$part" || break
    if grep -q "registered " "$D/logs/$part.log" \
      && kubectl_ get resourceslices --field-selector "spec.nodeName=node$n,spec.driver=$driver" -o name 2>/dev/null | grep -q .; then
      cat "$D/pids/$part"
      return 0
    fi
    sleep 0.5
  done
  stop "$part"
  die "the DRA driver on node$n did not register or publish its slice: $D/logs/$part.log"
}

compact() {
  local rev
  rev="$(in_node 1 curl -sf -X POST http://127.0.0.1:2379/v3/kv/range -d '{"key":"AA=="}' \
    | sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p')"
  [ -n "$rev" ] || die "cannot read etcd's revision"
  in_node 1 curl -sf -X POST http://127.0.0.1:2379/v3/kv/compaction -d "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null
  echo "$rev"
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  up) up "${1:-1}" ;;
  down) down ;;
  env) env_ ;;
  kubectl) kubectl_ "$@" ;;
  exec) n="${1:?exec takes a node name}"; shift; in_node "${n#node}" "$@" ;;
  start) start "${1:?start takes a part}" ;;
  stop) stop "${1:?stop takes a part}" ;;
  restart) stop "${1:?restart takes a part}"; start "$1" ;;
  compact) compact ;;
  deviceplugin) deviceplugin "${1:?deviceplugin takes a node name}" "${@:2}" ;;
  dradriver) dradriver "${1:?dradriver takes a node name}" "${@:2}" ;;
  image) import_image "${1:?image takes a tag}" "${2:?and a directory}" "${3:?and an entrypoint}" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
