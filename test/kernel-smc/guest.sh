#!/bin/sh
# test/kernel-smc/guest.sh - the kernel SMC-R suite's guest side, run in both guests of
# `tools/rxe-vm --peers 2 --rxe-fixed` by test/kernel-smc/run.sh (docs/kernel-smc.md).
# Peer 0 (10.99.0.1) is the AF_SMC server, peer 1 (10.99.0.2) the client and the judge: it
# prints one PASS/FAIL/SKIP line per case and the summary "N passed, M failed".
# The two guests meet through files in the shared --out directory ($RXE_VM_OUT): the server
# announces each listening socket (ready.CASE) and its exit status and counters (srv.CASE.*);
# every wait on the other guest is bounded.
# shellcheck shell=sh

set -u
OUT=$RXE_VM_OUT
PP=build/test/kernel-smc/smc_pingpong
NL=build/tools/smc_nl
RC_CLIENT=build/test/kernel-smc/rrpc_clc_client
RS_CLIENT=build/test/kernel-smc/rrpc_smc_client
RS_SERVER=build/test/kernel-smc/rrpc_smc_server
PORT_BASE=7400
PNETID=PNET99
UEID=RRPC-KSMC-TEST.99
SERVER=10.99.0.1
HW=/sys/class/infiniband/$RXE_VM_DEV/ports/1/hw_counters
WAIT_S=${KSMC_WAIT_S:-120}

log() { echo "ksmc[$RXE_VM_PEER]: $*"; }

# wait_file FILE: bounded wait (0.2 s steps) for a file the other guest writes.
wait_file() {
    _i=0
    while [ ! -e "$1" ]; do
        _i=$((_i + 1))
        [ "$_i" -le $((WAIT_S * 5)) ] || return 1
        sleep 0.2
    done
}

counter() { cat "$HW/$1" 2> /dev/null || echo 0; }
stat_of() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }

setup() {
    modprobe smc || { log "modprobe smc failed"; return 1; }
    $NL pnet-add "$PNETID" "$RXE_VM_NETDEV" "$RXE_VM_DEV" 1 || return 1
    $NL ueid-add "$UEID" || return 1
    # rrpc's client puts SMC's TCP option in its SYN with a cgroup v2 sock_ops program.
    grep -q ' - cgroup2 ' /proc/self/mountinfo || mount -t cgroup2 none /sys/fs/cgroup ||
        log "no cgroup v2: rrpc's client cannot mark its SYN"
    log "smc loaded; pnet $PNETID = $RXE_VM_NETDEV + $RXE_VM_DEV port 1; ueid $UEID"
}

# A snapshot of the link for a failure's diagnosis: every rxe0 counter and eth0's counters.
link_snapshot() {
    for f in "$HW"/*; do printf '%s=%s ' "${f##*/}" "$(cat "$f" 2> /dev/null)"; done
    echo
    ip -s link show "$RXE_VM_NETDEV" 2> /dev/null | tr -s ' \n' ' '
    echo
}

# diagnose NAME: what the client guest's link looked like after a failed case: every rxe0 and
# eth0 counter, whether IP still reaches the server, the kernel's last words. A stall below
# SMC (the guests' network) and one in the protocol look alike from the programs' output.
diagnose() {
    echo "  $1: client link: $(link_snapshot | tr '\n' ' ')"
    echo "  $1: ping: $(ping -c 2 -W 2 $SERVER 2>&1 | tail -n 2 | tr '\n' ' ')"
    dmesg | tail -n 15 | sed "s/^/  $1: client dmesg: /"
}

# ---- peer 0: the server ---------------------------------------------------------------------

# serve CASE ARGS...: one smc_pingpong server for one case; its status and counters for the
# client to judge.
serve() {
    c=$1; shift
    $PP server --ready "$OUT/ready.$c" "$@" > "$OUT/srv.$c.log" 2>&1
    echo $? > "$OUT/srv.$c.rc.tmp"
    $NL stats > "$OUT/srv.$c.stats" 2>&1
    $NL lgrs > "$OUT/srv.$c.lgrs" 2>&1
    $NL fallbacks > "$OUT/srv.$c.fallbacks" 2>&1
    link_snapshot > "$OUT/srv.$c.link"
    mv "$OUT/srv.$c.rc.tmp" "$OUT/srv.$c.rc"
}

server_main() {
    if ! setup; then : > "$OUT/server-setup-failed"; return 1; fi
    serve tcp --tcp --port $((PORT_BASE + 0)) --conns 1
    serve b64 --port $((PORT_BASE + 1)) --conns 1
    serve k64 --port $((PORT_BASE + 2)) --conns 1
    serve m16 --port $((PORT_BASE + 3)) --conns 1
    serve reuse --port $((PORT_BASE + 4)) --conns 2
    serve kill9 --port $((PORT_BASE + 5)) --conns 1 --die-after 1048576
    serve after-kill9 --port $((PORT_BASE + 6)) --conns 1
    serve rrpc-clc --port $((PORT_BASE + 7)) --conns 1
    rdma resource show 2> /dev/null | grep " $RXE_VM_DEV:" > "$OUT/srv.before-rrpc.res"
    serve rrpc-b64 --port $((PORT_BASE + 8)) --conns 1
    serve rrpc-k64 --port $((PORT_BASE + 9)) --conns 1
    serve rrpc-m16 --port $((PORT_BASE + 10)) --conns 1
    serve rrpc-close --port $((PORT_BASE + 11)) --conns 1
    serve rrpc-kill9 --port $((PORT_BASE + 12)) --conns 1 --die-after 1048576
    serve rrpc-half --port $((PORT_BASE + 15)) --conns 1 --half-close
    # The kernel's TEST_LINK after 1 s idle instead of 30 (read when a link group starts).
    tl=$(sysctl -n net.smc.smcr_testlink_time)
    sysctl -qw net.smc.smcr_testlink_time=1
    serve rrpc-testlink --port $((PORT_BASE + 14)) --conns 1
    sysctl -qw net.smc.smcr_testlink_time="$tl"
    # rrpc's client ends each link group with DELETE_LINK; the kernel frees it (QP, RMBs) in
    # the background: wait, bounded, until only the kernel<->kernel group is left.
    _i=0
    while [ "$($NL lgrs | grep -c '^lgr ')" -gt 1 ] && [ "$_i" -lt 100 ]; do
        _i=$((_i + 1)); sleep 0.2
    done
    $NL lgrs > "$OUT/srv.rrpc-final.lgrs.tmp" 2>&1
    rdma resource show 2> /dev/null | grep " $RXE_VM_DEV:" >> "$OUT/srv.rrpc-final.lgrs.tmp"
    mv "$OUT/srv.rrpc-final.lgrs.tmp" "$OUT/srv.rrpc-final.lgrs"
    # rrpc's server for three kernel AF_SMC client connections (rrpc-server-kernel-client).
    timeout 300 $RS_SERVER --port $((PORT_BASE + 13)) --conns 3 --ready "$OUT/ready.rrpc-srv" \
        --netdev "$RXE_VM_NETDEV" --smc_pnet "$RXE_VM_NETDEV=$RXE_VM_DEV" --smc_ueid "$UEID" \
        > "$OUT/srv.rrpc-srv.log" 2>&1
    echo $? > "$OUT/srv.rrpc-srv.rc"
    # Stay up until the client has judged everything (it reads our files).
    wait_file "$OUT/client-done" || log "the client never finished"
    dmesg | tail -n 40 > "$OUT/server-dmesg"
}

# ---- KSMC_CASES: chosen ping-pong cases only, each KSMC_REPEAT times ----------------------

# The cases a repeat run can pick: NAME -> "SIZE ROUNDS" (m16 is kernel <-> kernel,
# the rrpc-* ones rrpc's client against the kernel server). Each run of a case gets a port of
# its own (PORT_BASE + 100 + its number), so no connection of an earlier one is in the way.
repeat_spec() {
    case $1 in
        m16) echo "16777216 1" ;;
        rrpc-b64) echo "64 200" ;;
        rrpc-k64) echo "65536 20" ;;
        rrpc-m16) echo "16777216 1" ;;
        *) return 1 ;;
    esac
}

server_repeat() {
    if ! setup; then : > "$OUT/server-setup-failed"; return 1; fi
    : > "$OUT/ready.tcp"
    i=1 k=0
    while [ "$i" -le "$REPEAT" ] && [ ! -e "$OUT/stop" ]; do
        for c in $CASES; do
            [ -e "$OUT/stop" ] && break
            k=$((k + 1))
            serve "$c.$i" --port $((PORT_BASE + 100 + k)) --conns 1
        done
        i=$((i + 1))
    done
    wait_file "$OUT/client-done" || log "the client never finished"
    link_snapshot > "$OUT/srv.final.link"
    dmesg | tail -n 40 > "$OUT/server-dmesg"
}

client_repeat() {
    wait_file "$OUT/ready.tcp" || { echo "FAIL setup: the server never came up"; return 1; }
    [ -e "$OUT/server-setup-failed" ] && { echo "FAIL setup: server setup failed"; return 1; }
    if ! setup; then echo "FAIL setup: client setup failed"; echo "0 passed, 1 failed"; return 1; fi
    SERVER_FB=/dev/null ALL_RESULTS=
    i=1 k=0
    while [ "$i" -le "$REPEAT" ] && [ ! -e "$OUT/stop" ]; do
        for kase in $CASES; do
            set -- $(repeat_spec "$kase")
            k=$((k + 1))
            name=$kase.$i t0=$(date +%s) ok=0
            if [ "$kase" = m16 ]; then
                smc_case "$name" --port $((PORT_BASE + 100 + k)) --size "$1" --rounds "$2"
                [ "$RC" = 0 ] && ok=1
            else
                rrpc_run "$name" --port $((PORT_BASE + 100 + k)) --size "$1" --rounds "$2"
                if [ "$RC" = 0 ] && [ "$SRC" = 0 ] && echo "$RESULT" | grep -q '^smcr: ok'; then
                    if rrpc_smcr_ok "$name"; then ok=1; pass "$name" "$(( $(date +%s) - t0 )) s"; fi
                else fail "$name" "client status $RC, server $SRC"; fi
                SERVER_FB=$OUT/srv.$name.fallbacks
            fi
            if [ "$ok" != 1 ]; then
                diagnose "$name"
                [ "${KSMC_KEEP_GOING:-0}" = 1 ] || : > "$OUT/stop"
            fi
        done
        i=$((i + 1))
    done
    : > "$OUT/client-done"
    echo "$PASSED passed, $FAILED failed ($SKIPPED skipped)" | tee "$OUT/summary"
    [ "$FAILED" = 0 ]
}

# ---- peer 1: the client and judge -----------------------------------------------------------

PASSED=0 FAILED=0 SKIPPED=0
SERVER_OK=0   # the server's smcr_server_v2_ok after the last SMC case
pass() { PASSED=$((PASSED + 1)); echo "PASS $1${2:+: $2}"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $1: $2"; }
skip() { SKIPPED=$((SKIPPED + 1)); echo "SKIP $1: $2"; }

# exchange CASE ARGS...: runs the client for CASE once the server listens; sets RESULT (its
# output) and RC (its status, or the server's when only that one failed).
exchange() {
    c=$1; shift
    RESULT= RC=125
    wait_file "$OUT/ready.$c" || { RESULT="server never listened"; return; }
    RESULT=$($PP client --addr $SERVER "$@" 2>&1)
    RC=$?
    wait_file "$OUT/srv.$c.rc" || { RESULT="$RESULT; server never finished"; RC=125; return; }
    src=$(cat "$OUT/srv.$c.rc")
    if [ "$RC" = 0 ] && [ "$src" != 0 ]; then
        RC=$src; RESULT="$RESULT; server exit $src: $(tail -n 2 "$OUT/srv.$c.log" | tr '\n' ' ')"
    fi
}

# smc_case CASE ARGS...: a ping-pong that must run over SMC-R: byte-exact, counted by both
# sides' SMC-R v2 statistics (not as a fallback), and moving rxe0's packet counters.
smc_case() {
    c=$1; shift
    $NL stats > /tmp/before 2>&1; fb0=$($NL fallbacks | wc -l)
    tx0=$(counter sent_pkts); rx0=$(counter rcvd_pkts)
    exchange "$c" "$@"
    tx=$(( $(counter sent_pkts) - tx0 )); rx=$(( $(counter rcvd_pkts) - rx0 ))
    $NL stats > /tmp/after 2>&1; fb=$($NL fallbacks | wc -l)
    ok=$(( $(stat_of smcr_client_v2_ok /tmp/after) - $(stat_of smcr_client_v2_ok /tmp/before) ))
    sok=$(stat_of smcr_server_v2_ok "$OUT/srv.$c.stats" 2> /dev/null)
    sok=${sok:-0}
    echo "  $c: $RESULT; rxe0 sent +$tx rcvd +$rx packets; client SMC-Rv2 +$ok, server SMC-Rv2 $SERVER_OK -> $sok"
    if [ "$RC" != 0 ]; then fail "$c" "status $RC"; return; fi
    if [ "$fb" != "$fb0" ]; then fail "$c" "a fallback was counted: $($NL fallbacks | tr '\n' ' ')"; return; fi
    if [ "$ok" -lt 1 ]; then fail "$c" "the client's SMC-Rv2 success count did not move"; return; fi
    if [ "$sok" -le "$SERVER_OK" ]; then fail "$c" "the server's SMC-Rv2 success count did not move"; return; fi
    SERVER_OK=$sok
    if [ "$tx" -lt 4 ] || [ "$rx" -lt 4 ]; then fail "$c" "rxe0 counters did not move"; return; fi
    pass "$c" "$(echo "$RESULT" | grep -o 'rtt_us=[^ ]* MBps=[^ ]*' | head -n 1)"
}

# rrpc_clc_case: rrpc's client (SYN with option 254, SMC-Rv2 Proposal) against the kernel
# AF_SMC server. The kernel must answer the Proposal (Accept or Decline), the server must count
# the resulting fallback with the reason the two sides agree on, and the ping-pong must then run
# byte-exact over TCP.
rrpc_clc_case() {
    c=rrpc-clc-kernel-server
    wait_file "$OUT/ready.rrpc-clc" || { fail "$c" "server never listened"; return; }
    res=$($RC_CLIENT --addr $SERVER --port $((PORT_BASE + 7)) --gid-dev "$RXE_VM_DEV" \
          --ueid "$UEID" --rounds 20 2>&1)
    rc=$?
    wait_file "$OUT/srv.rrpc-clc.rc" || { fail "$c" "server never finished"; return; }
    echo "$res" | sed 's/^/  rrpc-clc: /'
    sfb=$(grep 'side=server' "$OUT/srv.rrpc-clc.fallbacks" | tr '\n' ' ')
    echo "  rrpc-clc: server fallbacks: $sfb; server exit $(cat "$OUT/srv.rrpc-clc.rc")"
    if echo "$res" | grep -q '^smcopt: cannot'; then
        skip "$c" "$(echo "$res" | grep '^smcopt: cannot')"; return
    fi
    if [ "$rc" != 0 ] || [ "$(cat "$OUT/srv.rrpc-clc.rc")" != 0 ]; then
        fail "$c" "client status $rc, server $(cat "$OUT/srv.rrpc-clc.rc")"; return
    fi
    # Either we declined the kernel's Accept (the server counts "peer declined", 0x05000000)
    # or the kernel declined us (the server counts its own reason, the one we received).
    if echo "$res" | grep -q '^clc: declined the Accept'; then want=0x05000000
    elif echo "$res" | grep -q '^clc: kernel declined'; then
        want=$(echo "$res" | sed -n 's/^clc: kernel declined.*diag=\(0x[0-9a-f]*\).*/\1/p')
    else fail "$c" "the CLC exchange never reached the kernel's accept/decline"; return; fi
    if ! grep -q "side=server code=$want" "$OUT/srv.rrpc-clc.fallbacks"; then
        fail "$c" "the server counted no fallback with code $want"; return
    fi
    pass "$c" "$(echo "$res" | grep '^clc:' | tail -n 1); server fallback $want counted"
}

# rrpc_run CASE ARGS...: rrpc_smc_client (rrpc's SMC-Rv2 client, rrpc/smc_stream.h)
# against the kernel AF_SMC server of CASE; sets RESULT, RC (the client's status), SRC (the
# server's), TX/RX (rxe0 packets) and SOK (the server's smcr_server_v2_ok).
rrpc_run() {
    c=$1; shift
    RESULT= RC=125 SRC=125 TX=0 RX=0 SOK=0
    wait_file "$OUT/ready.$c" || { RESULT="server never listened"; return; }
    tx0=$(counter sent_pkts); rx0=$(counter rcvd_pkts)
    RESULT=$(timeout 200 $RS_CLIENT --addr $SERVER --ibdev "$RXE_VM_DEV" --netdev "$RXE_VM_NETDEV" \
             --smc_pnet "$RXE_VM_NETDEV=$RXE_VM_DEV" --smc_ueid "$UEID" "$@" 2>&1)
    RC=$?
    TX=$(( $(counter sent_pkts) - tx0 )); RX=$(( $(counter rcvd_pkts) - rx0 ))
    wait_file "$OUT/srv.$c.rc" || { RESULT="$RESULT; server never finished"; return; }
    SRC=$(cat "$OUT/srv.$c.rc")
    SOK=$(stat_of smcr_server_v2_ok "$OUT/srv.$c.stats" 2> /dev/null)
    SOK=${SOK:-0}
    ALL_RESULTS="$ALL_RESULTS
$RESULT"
    echo "$RESULT" | sed "s/^/  $c: /"
    echo "  $c: client status $RC, server status $SRC, rxe0 sent +$TX rcvd +$RX, server SMC-Rv2 $SERVER_OK -> $SOK"
    [ "$RC" = 0 ] || diagnose "$c"
}

# rrpc_smcr_ok CASE: the exchange ran over SMC-R: the server counted one more SMC-Rv2 success,
# no new fallback on its side (its list is the same as after the previous case), rxe0 moved.
rrpc_smcr_ok() {
    if [ "$SOK" -le "$SERVER_OK" ]; then fail "$1" "the server's SMC-Rv2 success count did not move"; return 1; fi
    SERVER_OK=$SOK
    if ! cmp -s "$OUT/srv.$1.fallbacks" "$SERVER_FB"; then
        fail "$1" "the server counted a fallback: $(tr '\n' ' ' < "$OUT/srv.$1.fallbacks")"; return 1
    fi
    SERVER_FB=$OUT/srv.$1.fallbacks
    if [ "$TX" -lt 4 ] || [ "$RX" -lt 4 ]; then fail "$1" "rxe0 counters did not move"; return 1; fi
}

# The rrpc client cases: three ping-pongs, the kernel's orderly close, its kill -9, and what
# rrpc's side holds on the device afterwards.
rrpc_client_cases() {
    SERVER_FB=$OUT/srv.rrpc-clc.fallbacks
    ALL_RESULTS=
    ok=0
    for spec in "rrpc-b64 8 64 200" "rrpc-k64 9 65536 20" "rrpc-m16 10 16777216 1"; do
        set -- $spec
        rrpc_run "$1" --port $((PORT_BASE + $2)) --size "$3" --rounds "$4"
        if [ "$RC" != 0 ] || [ "$SRC" != 0 ] || ! echo "$RESULT" | grep -q '^smcr: ok'; then
            fail "$1" "client status $RC, server $SRC"; continue
        fi
        rrpc_smcr_ok "$1" || continue
        ok=$((ok + 1))
    done
    if [ "$ok" = 3 ]; then
        pass rrpc-client-kernel-server "64 B, 64 KiB and 16 MiB byte-exact over SMC-Rv2 ($(echo "$RESULT" | grep -o 'MBps=[^ ]*'), 16 MiB)"
    else fail rrpc-client-kernel-server "$ok of 3 ping-pongs passed"; fi

    # The kernel closes after its last echo: rrpc reads EOF, then closes; nothing hangs. The
    # exchange is captured for the Wireshark check (rrpc-capture-decodes).
    pcap=/tmp/rrpc-close.pcapng
    dumpcap -q -i "$RXE_VM_NETDEV" -w "$pcap" -a duration:120 > /tmp/dumpcap.log 2>&1 & dc=$!
    _i=0; while [ ! -s "$pcap" ] && [ "$_i" -lt 50 ]; do _i=$((_i + 1)); sleep 0.2; done
    rrpc_run rrpc-close --port $((PORT_BASE + 11)) --size 4096 --rounds 5 --expect-eof
    kill "$dc" 2> /dev/null; wait "$dc" 2> /dev/null
    close_ok=0 close_why="client status $RC, server $SRC"
    if [ "$RC" = 0 ] && [ "$SRC" = 0 ] && echo "$RESULT" | grep -q '^peer-close: eof' &&
       rrpc_smcr_ok rrpc-close; then close_ok=1; fi
    # kill -9 of the server after 1 MiB of 200 x 64 KiB: rrpc sees EOF or a reset.
    t0=$(date +%s)
    rrpc_run rrpc-kill9 --port $((PORT_BASE + 12)) --size 65536 --rounds 200 --expect-peer-death
    t=$(( $(date +%s) - t0 ))
    if [ "$close_ok" != 1 ]; then fail rrpc-peer-close "orderly close: $close_why"
    elif [ "$RC" != 0 ] || [ "$SRC" != 137 ] || ! echo "$RESULT" | grep -q '^peer-gone'; then
        fail rrpc-peer-close "kill -9: client status $RC, server $SRC"
    else pass rrpc-peer-close "orderly close: EOF; kill -9: $(echo "$RESULT" | grep '^peer-gone') after ${t}s"; fi

    # Half close: rrpc shuts its writing down after its message (rrpc_smc_stream_shutdown, the
    # "done writing" CDC); the kernel server must read EOF there, then it answers with the echo
    # (256 KiB: four times rrpc's RMB, so rrpc's consumer updates follow its shutdown) and
    # closes; rrpc reads the echo byte-exact, then EOF.
    rrpc_run rrpc-half --port $((PORT_BASE + 15)) --size 262144 --rounds 1 --half-close
    if [ "$RC" = 0 ] && [ "$SRC" = 0 ] && echo "$RESULT" | grep -q '^half-close: ' &&
       echo "$RESULT" | grep -q '^peer-close: eof' && rrpc_smcr_ok rrpc-half; then
        pass rrpc-half-close "the kernel server read EOF, then answered 256 KiB byte-exact; rrpc read its close"
    else fail rrpc-half-close "client status $RC, server $SRC: $(tail -n 1 "$OUT/srv.rrpc-half.log" 2> /dev/null)"; fi

    # Wireshark 4.0 over that capture: rrpc's CLC and CDC messages and the kernel's decode with
    # no malformed one (LLC v2 is not decoded by 4.0 at all, the kernel's own included).
    if [ -s "$pcap" ]; then
        nclc=$(tshark -r "$pcap" -Y 'smc.clc_msg' 2> /dev/null | wc -l)
        ncdc=$(tshark -r "$pcap" -Y 'smc.llc_msg == 0xfe' 2> /dev/null | wc -l)
        nbad=$(tshark -r "$pcap" -Y '_ws.malformed && (smc.clc_msg || smc.llc_msg == 0xfe)' 2> /dev/null | wc -l)
        nall=$(tshark -r "$pcap" -Y '_ws.malformed' 2> /dev/null | wc -l)
        echo "  capture: $nclc CLC, $ncdc CDC decoded; malformed among them $nbad; malformed in all $nall (LLC v2)"
        if [ "$nclc" -ge 3 ] && [ "$ncdc" -ge 10 ] && [ "$nbad" = 0 ]; then
            pass rrpc-capture-decodes "$nclc CLC and $ncdc CDC messages decoded, none malformed"
        else fail rrpc-capture-decodes "$nclc CLC, $ncdc CDC, $nbad malformed"; fi
    else skip rrpc-capture-decodes "no capture: $(head -c 200 /tmp/dumpcap.log)"; fi

    # An idle link: the kernel's TEST_LINKs are answered (it sends the second only after it took
    # the answer to the first) and the link carries on.
    rrpc_run rrpc-testlink --port $((PORT_BASE + 14)) --size 4096 --rounds 3 --idle-ms 8000
    ntl=$(echo "$RESULT" | sed -n 's/^idle: test_link=\([0-9]*\).*/\1/p')
    if [ "$RC" = 0 ] && [ "$SRC" = 0 ] && [ "${ntl:-0}" -ge 2 ] && echo "$RESULT" | grep -q '^smcr: ok' &&
       rrpc_smcr_ok rrpc-testlink; then
        pass rrpc-test-link "$ntl TEST_LINKs answered while idle, then the rounds went on byte-exact"
    else fail rrpc-test-link "client status $RC, server $SRC, TEST_LINKs ${ntl:-none}"; fi

    # Every QP, CQ, MR and PD rrpc's client made is gone once it closed (counted by the process
    # itself before it exits), and the kernel server freed each link group rrpc ended with
    # DELETE_LINK: only the kernel<->kernel group of the earlier cases is left there.
    wait_file "$OUT/srv.rrpc-final.lgrs" || { fail rrpc-no-leak "the server never reported"; return; }
    nres=$(echo "$ALL_RESULTS" | grep -c '^resources: .* same$')
    ndiff=$(echo "$ALL_RESULTS" | grep -c '^resources: ')
    slgr=$(grep -c '^lgr ' "$OUT/srv.rrpc-final.lgrs")
    echo "  rrpc-no-leak: $(echo "$ALL_RESULTS" | grep '^resources: ' | tail -n 1)"
    echo "  rrpc-no-leak: server before the rrpc cases: $(cat "$OUT/srv.before-rrpc.res" 2> /dev/null)"
    echo "  rrpc-no-leak: server after: $(tr '\n' ' ' < "$OUT/srv.rrpc-final.lgrs")"
    if [ "$ndiff" -lt 5 ] || [ "$nres" != "$ndiff" ]; then
        fail rrpc-no-leak "$nres of $ndiff rrpc clients left the device as they found it"
    elif [ "$slgr" != 1 ]; then fail rrpc-no-leak "the server still has $slgr link groups"
    else pass rrpc-no-leak "$nres clients: device counts back after close; server: 1 link group left"; fi
}

# The kernel's AF_SMC client against rrpc's server (rrpc_smc_server, three connections):
# 64 B, 64 KiB and 16 MiB byte-exact, each counted by the client kernel as an SMC-Rv2 success
# with no fallback, rxe0 moving; the server served all three and got each close CDC.
rrpc_server_case() {
    c=rrpc-server-kernel-client
    wait_file "$OUT/ready.rrpc-srv" || { fail "$c" "rrpc's server never listened"; return; }
    ok=0
    for spec in "64 200" "65536 20" "16777216 1"; do
        set -- $spec
        $NL stats > /tmp/before 2>&1; fb0=$($NL fallbacks | wc -l)
        tx0=$(counter sent_pkts); rx0=$(counter rcvd_pkts)
        res=$(timeout 200 $PP client --addr $SERVER --port $((PORT_BASE + 13)) --size "$1" --rounds "$2" 2>&1)
        rc=$?
        tx=$(( $(counter sent_pkts) - tx0 )); rx=$(( $(counter rcvd_pkts) - rx0 ))
        $NL stats > /tmp/after 2>&1; fb=$($NL fallbacks | wc -l)
        cok=$(( $(stat_of smcr_client_v2_ok /tmp/after) - $(stat_of smcr_client_v2_ok /tmp/before) ))
        $NL lgrs | sed -n 's/^lgr \(id=[^ ]*\).*/\1/p' > /tmp/lgrs.$1
        echo "  $c $1 x $2: $res; status $rc; client SMC-Rv2 +$cok; rxe0 sent +$tx rcvd +$rx; client link groups $(tr '\n' ' ' < /tmp/lgrs.$1)"
        if [ "$rc" = 0 ] && [ "$cok" = 1 ] && [ "$fb" = "$fb0" ] && [ "$tx" -ge 4 ] && [ "$rx" -ge 4 ]; then
            ok=$((ok + 1)); last=$res
        fi
    done
    wait_file "$OUT/srv.rrpc-srv.rc" || { fail "$c" "rrpc's server never finished"; return; }
    sed 's/^/  rrpc-srv: /' "$OUT/srv.rrpc-srv.log"
    served=$(grep -c '^served ' "$OUT/srv.rrpc-srv.log")
    closed=$(grep -c "^close: peer's close CDC received" "$OUT/srv.rrpc-srv.log")
    reused=$(grep -c "reused the link group" "$OUT/srv.rrpc-srv.log")
    if [ "$ok" != 3 ]; then fail "$c" "$ok of 3 kernel-client ping-pongs passed over SMC-Rv2"
    elif [ "$(cat "$OUT/srv.rrpc-srv.rc")" != 0 ] || [ "$served" != 3 ] || [ "$closed" != 3 ]; then
        fail "$c" "server status $(cat "$OUT/srv.rrpc-srv.rc"), served $served, closes $closed"
    else pass "$c" "64 B, 64 KiB, 16 MiB byte-exact over SMC-Rv2 ($(echo "$last" | grep -o 'connect_ms=[^ ]* .*MBps=[^ ]*'), 16 MiB)"; fi
    # The 2nd and 3rd connection went on the link group of the 1st: rrpc's server says so and
    # the client kernel started no link group after the first connection's (an older one of
    # the kernel <-> kernel cases may have gone meanwhile).
    new=$(cat /tmp/lgrs.65536 /tmp/lgrs.16777216 | grep -vxF -f /tmp/lgrs.64 | sort -u | tr '\n' ' ')
    if [ "$reused" = 2 ] && [ -s /tmp/lgrs.64 ] && [ -z "$new" ]; then
        pass rrpc-server-lgr-reused "2 of 3 connections on the first one's link group; no new link group on the client"
    else fail rrpc-server-lgr-reused "server reused $reused times; link groups new after the first connection: ${new:-none}"; fi
}

client_main() {
    wait_file "$OUT/ready.tcp" || { echo "FAIL setup: the server never came up"; return 1; }
    [ -e "$OUT/server-setup-failed" ] && { echo "FAIL setup: server setup failed"; return 1; }
    if ! setup; then echo "FAIL setup: client setup failed"; echo "0 passed, 1 failed"; return 1; fi

    # TCP first: the baseline of the same boot, and proof that TCP leaves rxe0 alone.
    tx0=$(counter sent_pkts)
    exchange tcp --tcp --port $((PORT_BASE + 0)) --size 64 --rounds 200
    tx=$(( $(counter sent_pkts) - tx0 ))
    echo "  tcp: $RESULT; rxe0 sent +$tx packets"
    if [ "$RC" = 0 ] && [ "$tx" -lt 4 ]; then pass tcp-baseline-64B "$(echo "$RESULT" | grep -o 'rtt_us=[^ ]*')"
    else fail tcp-baseline-64B "status $RC, rxe0 sent +$tx"; fi

    smc_case b64 --port $((PORT_BASE + 1)) --size 64 --rounds 200
    smc_case k64 --port $((PORT_BASE + 2)) --size 65536 --rounds 20
    smc_case m16 --port $((PORT_BASE + 3)) --size 16777216 --rounds 1

    # A second connection (while the link group of the first exists) reuses it: still one
    # link group on each side, and two more SMC-Rv2 successes.
    smc_case reuse --port $((PORT_BASE + 4)) --size 4096 --rounds 20 --conns 2
    nlgr=$($NL lgrs | grep -c '^lgr ')
    slgr=$(grep -c '^lgr ' "$OUT/srv.reuse.lgrs" 2> /dev/null || echo 0)
    echo "  link groups: client $nlgr, server $slgr; $($NL links | head -n 1)"
    if [ "$nlgr" = 1 ] && [ "$slgr" = 1 ]; then pass lgr-reused "one link group per side"
    else fail lgr-reused "client has $nlgr link groups, server $slgr"; fi

    # kill -9 of the server in mid-stream: the client sees EOF or a reset, within its bounds.
    t0=$(date +%s)
    exchange kill9 --port $((PORT_BASE + 5)) --size 65536 --rounds 200 --expect-peer-death
    t=$(( $(date +%s) - t0 ))
    echo "  kill9: $RESULT (${t}s)"
    case $(cat "$OUT/srv.kill9.rc" 2> /dev/null) in
        137) srv_killed=1 ;; *) srv_killed=0 ;;
    esac
    # The server's status is its own SIGKILL (137), which exchange reports as its status.
    if echo "$RESULT" | grep -q '^peer-gone' && [ "$srv_killed" = 1 ]; then
        pass kill9-mid-stream "$(echo "$RESULT" | head -n 1) after ${t}s"
    else fail kill9-mid-stream "client: $RESULT"; fi
    # ... and the link group still carries the next connection.
    smc_case after-kill9 --port $((PORT_BASE + 6)) --size 65536 --rounds 5
    rrpc_clc_case
    rrpc_client_cases
    rrpc_server_case
    : > "$OUT/client-done"

    echo "  client stats: $($NL stats | tr '\n' ' ')"
    echo "  fallbacks: $($NL fallbacks | tr '\n' ' ')"
    echo "$PASSED passed, $FAILED failed ($SKIPPED skipped)" | tee "$OUT/summary"
    [ "$FAILED" = 0 ]
}

CASES=${KSMC_CASES:-}
REPEAT=${KSMC_REPEAT:-1}
for c in $CASES; do
    repeat_spec "$c" > /dev/null || { echo "KSMC_CASES: no repeatable case $c (m16 rrpc-b64 rrpc-k64 rrpc-m16)"; exit 2; }
done
case ${RXE_VM_PEER:-}${CASES:+-repeat} in
    0) server_main ;;
    1) client_main ;;
    0-repeat) server_repeat ;;
    1-repeat) client_repeat ;;
    *) echo "test/kernel-smc/guest.sh runs inside tools/rxe-vm --peers 2" >&2; exit 2 ;;
esac
