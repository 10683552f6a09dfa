# tools/rxe-vm.d/guest.sh - second stage of an rxe-vm guest: PID 1 inside a chroot of the
# host root (read-only 9p). Run by the host's /bin/sh, so POSIX sh only.
# It mounts the writable places (tmpfs /tmp and /dev/shm, the --out share at its host path),
# sets up Soft-RoCE (rdma_rxe on a dummy netdev, or on virtio-net in --peers mode), runs the
# job the host wrote into the control share with stdout/stderr on two virtio-serial ports,
# records the job's exit status in /run/rxe-vm/status and powers the guest off.
# Status file grammar (read by tools/rxe-vm): "exit N" or "setup-failed REASON". No status
# file at all means the guest died; the host treats that as a failure, never as a pass.
# shellcheck shell=sh

set -u
CTL=/run/rxe-vm
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

now() { cut -d' ' -f1 /proc/uptime; }
log() { echo "rxe-vm: [$(now)s] $*"; }

halt_guest() {
    sync
    echo o > /proc/sysrq-trigger
    # Power-off is asynchronous; if it never comes, PID 1 exiting panics the kernel and
    # panic=-1 plus -no-reboot end QEMU anyway.
    sleep 20
    exit 1
}

# Status is written to a temporary name and renamed so the host never reads half a line.
put_status() {
    printf '%s\n' "$1" > "$CTL/status.tmp" && mv -f "$CTL/status.tmp" "$CTL/status"
}

fatal() {
    log "FATAL: $*"
    put_status "setup-failed $*"
    halt_guest
}

# Bounded poll: wait_for SECONDS DESCRIPTION COMMAND... (0.2 s steps).
# Modules normally come from the initramfs already; modprobe (over 9p) is the fallback.
load() { [ -d "/sys/module/$1" ] || modprobe "$1"; }

wait_for() {
    _limit=$(($1 * 5)); _what=$2; shift 2
    _i=0
    while ! "$@" > /dev/null 2>&1; do
        _i=$((_i + 1))
        [ "$_i" -le "$_limit" ] || return 1
        sleep 0.2
    done
    log "$_what after $((_i / 5)).$((_i % 5 * 2))s"
}

[ -r "$CTL/config" ] || fatal "no config in the control share"
. "$CTL/config"

log "stage 2 up (host root via 9p, read-only)"
mount -t tmpfs -o mode=1777 tmpfs /tmp || fatal "cannot mount tmpfs on /tmp"
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620 devpts /dev/pts || fatal "cannot mount /dev/pts"
mount -t tmpfs -o mode=1777 tmpfs /dev/shm || fatal "cannot mount tmpfs on /dev/shm"
# A working directory under /tmp or /run (hidden by the guest's tmpfs) comes in
# as its own read-only share, mounted first: --out may lie inside it.
if [ "${RXE_VM_CWD_SHARE:-0}" = 1 ]; then
    mkdir -p "$RXE_VM_CWD" || fatal "cannot create $RXE_VM_CWD in the guest"
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro cwd "$RXE_VM_CWD" ||
        fatal "cannot mount the working directory share on $RXE_VM_CWD"
fi
# An --out under /tmp or /run lives below a guest tmpfs: make its mount point there.
[ -d "$RXE_VM_OUT" ] || mkdir -p "$RXE_VM_OUT" 2> /dev/null ||
    fatal "out directory $RXE_VM_OUT is not visible in the guest"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out "$RXE_VM_OUT" ||
    fatal "cannot mount the out share on $RXE_VM_OUT"
echo "$RXE_VM_HOSTNAME" > /proc/sys/kernel/hostname
# shellcheck disable=SC3045 # dash and busybox sh both have ulimit -l
ulimit -l unlimited 2> /dev/null || ulimit -l unlimited -H 2> /dev/null || true

# Output ports: the host named them rxevm.stdout and rxevm.stderr.
load virtio_console || fatal "modprobe virtio_console failed"
ports_ready() {
    OUTDEV=; ERRDEV=
    for p in /sys/class/virtio-ports/*; do
        [ -r "$p/name" ] || continue
        case $(cat "$p/name") in
            rxevm.stdout) OUTDEV=/dev/${p##*/} ;;
            rxevm.stderr) ERRDEV=/dev/${p##*/} ;;
        esac
    done
    [ -n "$OUTDEV" ] && [ -n "$ERRDEV" ] && [ -c "$OUTDEV" ] && [ -c "$ERRDEV" ]
}
wait_for 10 "output ports ready" ports_ready || fatal "virtio-serial output ports did not appear"
ports_ready

# ---- Soft-RoCE -----------------------------------------------------------------------------
ip link set lo up || fatal "cannot bring lo up"
load rdma_rxe || fatal "modprobe rdma_rxe failed"
# --rxe-fixed: the stock module (from the initramfs, no device yet) makes way for ours.
if [ -n "${RXE_VM_RXE_KO:-}" ]; then
    rmmod rdma_rxe || fatal "rmmod of the stock rdma_rxe failed"
    insmod "$RXE_VM_RXE_KO" || fatal "insmod $RXE_VM_RXE_KO failed"
    log "patched rdma_rxe loaded from $RXE_VM_RXE_KO"
fi
if [ "$RXE_VM_PEERS" -gt 1 ]; then
    load virtio_net || fatal "modprobe virtio_net failed"
    find_nic() {
        NIC=
        for n in /sys/class/net/*; do
            [ -e "$n/device" ] && { NIC=${n##*/}; return 0; }
        done
        return 1
    }
    wait_for 10 "virtio-net ready" find_nic || fatal "no virtio-net interface appeared"
    find_nic
    ip link set "$NIC" name "$RXE_VM_NETDEV" || fatal "cannot rename $NIC"
else
    load dummy || fatal "modprobe dummy failed"
    # dummy.ko creates dummy0 itself when loaded without numdummies=0.
    ip link show "$RXE_VM_NETDEV" > /dev/null 2>&1 ||
        ip link add "$RXE_VM_NETDEV" type dummy || fatal "cannot create $RXE_VM_NETDEV"
fi
ip addr add "$RXE_VM_ADDR/24" dev "$RXE_VM_NETDEV" || fatal "cannot address $RXE_VM_NETDEV"
ip link set "$RXE_VM_NETDEV" up || fatal "cannot bring $RXE_VM_NETDEV up"
port_active() { ibv_devinfo -d "$1" | grep -q PORT_ACTIVE; }
if [ "${RXE_VM_RXE:-1}" = 1 ]; then
    rdma link add "$RXE_VM_DEV" type rxe netdev "$RXE_VM_NETDEV" ||
        fatal "rdma link add $RXE_VM_DEV type rxe netdev $RXE_VM_NETDEV failed"
    wait_for "$RXE_VM_SETUP_TIMEOUT" "$RXE_VM_DEV PORT_ACTIVE on $RXE_VM_NETDEV $RXE_VM_ADDR" \
        port_active "$RXE_VM_DEV" ||
        fatal "$RXE_VM_DEV did not reach PORT_ACTIVE in ${RXE_VM_SETUP_TIMEOUT}s"
fi
# Soft-iWARP (--siw): our own out-of-tree siw.ko (Debian's kernel has CONFIG_RDMA_SIW unset),
# read from the host root; ib_core and libcrc32c came from the initramfs.
if [ -n "${RXE_VM_SIW_KO:-}" ]; then
    [ -d /sys/module/siw ] || insmod "$RXE_VM_SIW_KO" || fatal "insmod $RXE_VM_SIW_KO failed"
    if [ "$RXE_VM_SIW_NETDEV" != "$RXE_VM_NETDEV" ]; then
        # Next to rxe0: a netdev and address of its own, as rdma_cm picks the device by address.
        ip link add "$RXE_VM_SIW_NETDEV" type dummy || fatal "cannot create $RXE_VM_SIW_NETDEV"
        ip addr add "$RXE_VM_SIW_ADDR/24" dev "$RXE_VM_SIW_NETDEV" ||
            fatal "cannot address $RXE_VM_SIW_NETDEV"
        ip link set "$RXE_VM_SIW_NETDEV" up || fatal "cannot bring $RXE_VM_SIW_NETDEV up"
    fi
    rdma link add "$RXE_VM_SIW_DEV" type siw netdev "$RXE_VM_SIW_NETDEV" ||
        fatal "rdma link add $RXE_VM_SIW_DEV type siw netdev $RXE_VM_SIW_NETDEV failed"
    wait_for "$RXE_VM_SETUP_TIMEOUT" "$RXE_VM_SIW_DEV PORT_ACTIVE on $RXE_VM_SIW_NETDEV" \
        port_active "$RXE_VM_SIW_DEV" ||
        fatal "$RXE_VM_SIW_DEV did not reach PORT_ACTIVE in ${RXE_VM_SETUP_TIMEOUT}s"
fi
if [ "$RXE_VM_PEERS" -gt 1 ]; then
    # Both guests boot at about the same time; wait (bounded) until the peer answers.
    for a in $RXE_VM_PEER_ADDRS; do
        [ "$a" = "$RXE_VM_ADDR" ] && continue
        wait_for "$RXE_VM_SETUP_TIMEOUT" "peer $a reachable" busybox ping -c 1 -W 1 "$a" ||
            fatal "peer $a did not answer ping"
    done
fi

# ---- the job -------------------------------------------------------------------------------
[ -d "$RXE_VM_CWD" ] || fatal "working directory $RXE_VM_CWD is not visible in the guest" \
    "(guest /tmp and /run are its own tmpfs)"
log "running the command in $RXE_VM_CWD"
: > "$CTL/started"   # its mtime (host clock) tells the host how long boot + setup took
env -i /bin/sh "$CTL/job" < /dev/null > "$OUTDEV" 2> "$ERRDEV"
rc=$?
if [ "$RXE_VM_SHELL" = 1 ]; then
    # Interactive debugging: a login-like shell with the job's environment on the serial
    # console (the host's terminal). With a command, its status stays the run's status.
    has_cmd=$(grep -c '^exec ' "$CTL/job")
    echo "rxe-vm: root shell in the guest; $RXE_VM_DEV is up on $RXE_VM_NETDEV $RXE_VM_ADDR." \
         "exit (or ^D) powers off." > /dev/ttyS0
    setsid -c env -i /bin/sh -c '. /run/rxe-vm/env; cd "$1"; exec /bin/bash -i' sh \
        "$RXE_VM_CWD" < /dev/ttyS0 > /dev/ttyS0 2>&1
    src=$?
    [ "$has_cmd" -gt 0 ] || rc=$src
fi
put_status "exit $rc" || log "could not write the status file"
log "command exited with status $rc"
echo "RXE_VM_EXIT_STATUS=$rc"
halt_guest
