#!/usr/bin/env bash
# braid on a real Kubernetes, as an operator meets it. Usage: sudo scripts/demo-kubernetes.sh
#
# scripts/node.sh brings up a one-node cluster in namespaces of its own (Kubernetes, etcd and
# containerd built from their Go modules by scripts/build-node.sh: 6–9 minutes on a 2-core
# machine the first time, reused after) with braid installed by `kubectl apply -k
# deploy/kubernetes`; then a NetworkAttachmentDefinition goes in, a pod annotated with it and
# with the example ConfigMap's `isolated` network starts, and `kubectl` shows its interfaces and
# the network-status braid's agent published; then hot-plug is turned on (deploy/kubernetes-hotplug)
# and the running pod's annotation edited: one network detached, another attached, network-status
# follows. Everything is removed at the end, also on failure.
# Needs what scripts/test.sh installs (podman, runc, iptables, openssl, curl, Go).
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" -eq 0 ] || { echo "run as root: sudo scripts/demo-kubernetes.sh" >&2; exit 1; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

need=()
for c in podman runc iptables openssl curl jq; do command -v "$c" >/dev/null || need+=("$c"); done
command -v musl-gcc >/dev/null || need+=(musl-tools)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
[ -x /bin/busybox ] || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
  step "apt-get update; installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

export BRAID_NODE_DIR="${BRAID_NODE_DIR:-$(mkdir -p /var/lib/braid && mktemp -d /var/lib/braid/demo-node.XXXXXX)}"
trap 'bash scripts/node.sh down >/dev/null 2>&1 || true' EXIT

step "building braid's release binaries (static) and the cluster's parts (Go modules, once per machine)"
BRAID_RELEASE_DIR="${BRAID_RELEASE_DIR:-$(bash scripts/build-release.sh | tail -n1)}"
export BRAID_RELEASE_DIR
bash scripts/build-node.sh >/dev/null

step "scripts/node.sh up: etcd, kube-apiserver, controller manager, scheduler, containerd, kubelet, kube-proxy; kubectl apply -k deploy/kubernetes"
bash scripts/node.sh up 1 2>&1 | grep -E '^== node|successfully rolled out|export KUBECONFIG' || true
export KUBECONFIG="$BRAID_NODE_DIR/kubeconfig"
k() { echo "\$ kubectl $*"; "$BRAID_NODE_DIR/bin/kubectl" "$@"; }

step "the node and braid's agent"
k get nodes -o wide
k -n kube-system get pods -o wide

step "a NetworkAttachmentDefinition in namespace demo"
k create namespace demo >/dev/null
cat <<'EOF' | tee /dev/stderr | "$BRAID_NODE_DIR/bin/kubectl" apply -f -
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: backend
  namespace: demo
spec:
  config: '{"cniVersion": "1.0.0", "name": "backend", "plugins": [{"type": "bridge", "bridge": "br-backend",
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "198.18.120.0/24"}]]}}]}'
EOF
step "a pod selecting it and the ConfigMap's default/isolated network"
cat <<'EOF' | tee /dev/stderr | "$BRAID_NODE_DIR/bin/kubectl" apply -f -
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: demo
  annotations:
    k8s.v1.cni.cncf.io/networks: backend, default/isolated
spec:
  nodeName: node1
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: localhost/braid/busybox:1
    imagePullPolicy: Never
    command: ["sleep", "100000"]
EOF
k -n demo wait --for=condition=Ready pod/web --timeout=180s
for _ in $(seq 1 240); do
  s="$("$BRAID_NODE_DIR/bin/kubectl" -n demo get pod web -o jsonpath='{.metadata.annotations.k8s\.v1\.cni\.cncf\.io/network-status}')"
  [ -n "$s" ] && break
  sleep 0.5
done

step "inside the pod"
k -n demo exec web -- ip -o -4 addr

step "the pod's network-status, published by braid's agent"
echo "\$ kubectl -n demo get pod web -o jsonpath='{.metadata.annotations.k8s\.v1\.cni\.cncf\.io/network-status}' | jq"
[ -n "$s" ] || { echo "no network-status on the pod" >&2; exit 1; }
echo "$s" | jq .

step "hot-plug: kubectl apply -k deploy/kubernetes-hotplug, then the running pod's networks changed"
"$BRAID_NODE_DIR/bin/kubectl" apply -k deploy/kubernetes-hotplug >/dev/null
k -n kube-system rollout status daemonset/braid-install --timeout=240s
cat <<'EOF' | tee /dev/stderr | "$BRAID_NODE_DIR/bin/kubectl" apply -f -
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: frontend
  namespace: demo
spec:
  config: '{"cniVersion": "1.0.0", "name": "frontend", "plugins": [{"type": "bridge", "bridge": "br-frontend",
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "198.18.121.0/24"}]]}}]}'
EOF
k -n demo annotate pod web --overwrite 'k8s.v1.cni.cncf.io/networks=backend, frontend'
for _ in $(seq 1 240); do
  s="$("$BRAID_NODE_DIR/bin/kubectl" -n demo get pod web -o jsonpath='{.metadata.annotations.k8s\.v1\.cni\.cncf\.io/network-status}')"
  case "$s" in *demo/frontend*) break ;; esac
  sleep 0.5
done
case "$s" in *demo/frontend*) ;; *) echo "network-status never named demo/frontend: $s" >&2; exit 1 ;; esac
echo "(default/isolated detached, demo/frontend attached; eth0 and net1 untouched)"
k -n demo exec web -- ip -o -4 addr
echo "$s" | jq -c '.[] | {name, interface, ips}'

step "kubectl delete namespace demo; scripts/node.sh down"
k delete namespace demo --wait=true
bash scripts/node.sh down
trap - EXIT
echo "demo-kubernetes: done, nothing left in $BRAID_NODE_DIR"
