#!/bin/busybox sh
# The guest's /init (see mod.rs beside it; guest.rs writes its configuration): static busybox as
# PID 1's shell. It loads the virtio modules listed in /braid/modules, then sources
# /braid/guest.sh, the per-boot configuration written by the test: a list of calls to the
# functions below, arguments validated and quoted on the host.
# Everything the host parses is a line starting with "BRAID-".
/bin/busybox mkdir -p /proc /sys /dev /usr/bin /usr/sbin /sbin
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
ip link set lo up

error() { echo "BRAID-ERROR $*"; }
run() { "$@" || error "$*"; }

for m in $(cat /braid/modules); do
  insmod "/lib/modules/$m.ko" || error "insmod $m"
done

# nic INDEX MAC: finds the interface with that MAC (virtio probes it while insmod runs; wait up to
# 10 s in case a device shows up late) and remembers it as NIC<INDEX>.
nic() {
  found=""
  tries=0
  while [ -z "$found" ] && [ "$tries" -lt 100 ]; do
    for d in /sys/class/net/*; do
      [ "$(cat "$d/address" 2>/dev/null)" = "$2" ] && found="${d##*/}"
    done
    [ -n "$found" ] || { sleep 0.1; tries=$((tries + 1)); }
  done
  if [ -z "$found" ]; then
    error "nic $1: no interface with MAC $2"
    return
  fi
  eval "NIC$1=$found"
  echo "BRAID-NIC $1 $found $2"
  # The addresses are given, not discovered: no duplicate address detection to wait for.
  [ -w "/proc/sys/net/ipv6/conf/$found/accept_dad" ] && echo 0 > "/proc/sys/net/ipv6/conf/$found/accept_dad"
}

# dev INDEX: the interface name of NIC<INDEX> ("missing" if it was not found).
dev() { eval "echo \${NIC$1:-missing}"; }

# addr INDEX CIDR
addr() { run ip addr add "$2" dev "$(dev "$1")"; }

# up INDEX
up() { run ip link set "$(dev "$1")" up; }

# route INDEX FAMILY(4|6) DST [VIA]
route() {
  if [ -n "$4" ]; then
    run ip "-$2" route add "$3" via "$4" dev "$(dev "$1")"
  else
    run ip "-$2" route add "$3" dev "$(dev "$1")"
  fi
}

# show: the network as the guest sees it, for the log.
show() {
  echo "BRAID-SHOW begin"
  ip addr
  ip -4 route
  ip -6 route
  echo "BRAID-SHOW end"
}

# probe N ping FAMILY(4|6) NIC ADDR TRIES: ok at the first echo reply of up to TRIES pings.
# probe N sh COMMAND: ok when the command exits 0.
probe() {
  n="$1"
  ok=fail
  case "$2" in
    ping)
      i=0
      while [ "$i" -lt "$6" ]; do
        if ping "-$3" -c 1 -W 2 -I "$(dev "$4")" "$5"; then ok=ok; break; fi
        i=$((i + 1))
      done
      ;;
    sh)
      sh -c "$3" && ok=ok
      ;;
    *)
      error "probe $n: unknown kind $2"
      ;;
  esac
  echo "BRAID-PROBE $n $ok"
}

if [ -r /braid/guest.sh ]; then
  . /braid/guest.sh
else
  error "no /braid/guest.sh"
fi
echo "BRAID-DONE"
poweroff -f
