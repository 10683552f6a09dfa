#!/bin/sh
# test/rig/verbs-check.sh - proves real verbs work on this machine: the RDMA device's port is
# PORT_ACTIVE and a perftest client+server pair (ib_send_lat, ib_write_bw) completes on it.
# Runs inside the rxe-vm guest (device and address from RXE_VM_DEV/RXE_VM_ADDR) or directly on a
# host with an active RDMA port (first active device, loopback for perftest's TCP exchange).
# Under `tools/rxe-vm --peers 2` peer 0 runs the servers and peer 1 the clients, across the
# two guests. Prints the perftest numbers; exit 0 only if every step passed. Copies logs to
# $RXE_VM_OUT.
set -u

fail() { echo "verbs-check: FAIL: $*"; exit 1; }
for t in ibv_devinfo ib_send_lat ib_write_bw timeout; do
    command -v "$t" > /dev/null 2>&1 ||
        fail "$t not found (apt-get install -y ibverbs-utils perftest coreutils)"
done

DEV=${RXE_VM_DEV:-}
if [ -z "$DEV" ]; then
    for d in $(ibv_devinfo -l 2> /dev/null | sed -n 's/^[[:space:]]\{1,\}\([^[:space:]]\{1,\}\)$/\1/p'); do
        if ibv_devinfo -d "$d" 2> /dev/null | grep -q PORT_ACTIVE; then DEV=$d; break; fi
    done
    [ -n "$DEV" ] || fail "no RDMA device with an active port"
fi
ADDR=${RXE_VM_ADDR:-127.0.0.1}
ROLE=both
set -- ${RXE_VM_PEER_ADDRS:-}
if [ $# -eq 2 ]; then
    # Two guests: the client side talks to peer 0's address.
    if [ "${RXE_VM_PEER:-0}" = 0 ]; then ROLE=server; else ROLE=client; fi
    ADDR=$1
fi
LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/verbs-check.XXXXXX") || fail "mktemp failed"

echo "verbs-check: device $DEV, perftest control address $ADDR, role $ROLE"
ibv_devinfo -d "$DEV" > "$LOGDIR/ibv_devinfo.txt" 2>&1 || fail "ibv_devinfo -d $DEV failed"
cat "$LOGDIR/ibv_devinfo.txt"
grep -q PORT_ACTIVE "$LOGDIR/ibv_devinfo.txt" || fail "$DEV port is not PORT_ACTIVE"
echo "verbs-check: PASS ibv_devinfo: $DEV PORT_ACTIVE"

# listening PORT: is something listening on TCP PORT (IPv4 or IPv6)? State 0A = LISTEN.
listening() {
    _hex=$(printf '%04X' "$1")
    awk -v p=":$_hex" '$4 == "0A" && substr($2, length($2) - 4) == p { found = 1 }
        END { exit !found }' /proc/net/tcp /proc/net/tcp6 2> /dev/null
}

# pair NAME PORT ARGS...: server in the background, client once the server listens. In
# two-guest mode only one side runs here; the client retries the connection until the server
# in the other guest is up (bounded), since it cannot see the other guest's sockets.
pair() {
    _name=$1 _port=$2; shift 2
    _log=$LOGDIR/$_name.client.txt
    if [ "$ROLE" = server ]; then
        timeout 300 "$_name" -d "$DEV" -p "$_port" "$@" > "$_log" 2>&1
        _crc=$?
        cat "$_log"
        [ "$_crc" -eq 0 ] || fail "$_name server: exit $_crc"
        return 0
    fi
    if [ "$ROLE" = client ]; then
        _i=0
        until timeout 120 "$_name" -d "$DEV" -p "$_port" "$@" "$ADDR" > "$_log" 2>&1; do
            _i=$((_i + 1))
            if [ "$_i" -gt 100 ] || ! grep -q "Couldn't connect" "$_log"; then
                cat "$_log"
                fail "$_name client to $ADDR failed"
            fi
            sleep 0.5
        done
        cat "$_log"
        return 0
    fi
    timeout 120 "$_name" -d "$DEV" -p "$_port" "$@" > "$LOGDIR/$_name.server.txt" 2>&1 &
    _srv=$!
    _i=0
    until listening "$_port"; do
        _i=$((_i + 1))
        if [ "$_i" -gt 300 ] || ! kill -0 "$_srv" 2> /dev/null; then
            cat "$LOGDIR/$_name.server.txt"
            kill "$_srv" 2> /dev/null
            fail "$_name server did not start listening on port $_port"
        fi
        sleep 0.1
    done
    timeout 120 "$_name" -d "$DEV" -p "$_port" "$@" "$ADDR" > "$_log" 2>&1
    _crc=$?
    wait "$_srv"
    _src=$?
    cat "$_log"
    if [ "$_crc" -ne 0 ] || [ "$_src" -ne 0 ]; then
        echo "--- $_name server output:"
        cat "$LOGDIR/$_name.server.txt"
        fail "$_name: client exit $_crc, server exit $_src"
    fi
}

# The result row is the line after the "#bytes" header.
row() { awk '/#bytes/ { getline; print; exit }' "$LOGDIR/$1.client.txt"; }

pair ib_send_lat 18515 -F -s 2 -n 1000
# shellcheck disable=SC2046 # splitting the row into fields is the point
set -- $(row ib_send_lat)
[ $# -ge 6 ] || fail "ib_send_lat printed no result row"
echo "verbs-check: PASS ib_send_lat: $1 B x $2: t_min $3 us, t_typical $5 us, t_avg $6 us"
LAT="ib_send_lat $1 B: t_typical $5 us, t_avg $6 us"

pair ib_write_bw 18516 -F -s 65536 -n 1000
# shellcheck disable=SC2046
set -- $(row ib_write_bw)
[ $# -ge 4 ] || fail "ib_write_bw printed no result row"
echo "verbs-check: PASS ib_write_bw: $1 B x $2: BW peak $3 MB/s, BW average $4 MB/s"
BW="ib_write_bw $1 B: BW average $4 MB/s"

if [ -n "${RXE_VM_OUT:-}" ] && [ -d "$RXE_VM_OUT" ]; then
    _dst=$RXE_VM_OUT/verbs-check
    [ "$ROLE" = both ] || _dst=$_dst.$ROLE
    mkdir -p "$_dst" && cp "$LOGDIR"/*.txt "$_dst/"
fi
rm -rf "$LOGDIR"
echo "verbs-check: OK on $DEV: $LAT; $BW"
