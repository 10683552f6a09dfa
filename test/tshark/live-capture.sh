#!/usr/bin/env bash
# test/tshark/live-capture.sh - captures real rrpc handshakes on the wire and checks that
# Wireshark's SMC dissector decodes them: an RDMA connection shows CLC Proposal, Accept and
# Confirm; a connection to a server that does not offer RDMA shows a Proposal and a Decline;
# neither shows malformed packets or expert errors. The RPCs run too (rdma_performance).
# Needs real verbs and root for dumpcap: run it as `tools/rxe-vm -- test/tshark/live-capture.sh`
# (tools/run-rdma-tests does this with the other RDMA tests) or on a host with an RDMA port.
set -u -o pipefail
cd "$(dirname "$0")/../.."
ADDR=${RXE_VM_ADDR:-${RRPC_TEST_RDMA_ADDR:-10.99.0.1}}
OUT=$(mktemp -d)
declare -A cap   # capture name -> its dumpcap's pid
trap 'kill "${cap[@]}" 2>/dev/null; rm -rf "$OUT"' EXIT
fail=0

# start_capture NAME PORT: dumpcap records the port for CAPTURE_SECONDS, in the background.
# dumpcap stops by itself then: interrupting it right after the run loses packets it has not
# read yet (seen in the emulated guest). Both captures run at once, on their own ports, so the
# test waits out that fixed duration once, not twice (it was 40 of this script's 62 s).
start_capture() {
  local name=$1 port=$2
  dumpcap -q -i lo -f "tcp port $port" -a duration:"${CAPTURE_SECONDS:-20}" -w "$OUT/$name.pcap" \
    2>"$OUT/$name.dumpcap" &
  cap[$name]=$!
}

# wait_live NAME: dumpcap says "Capturing on" once the filter is live; its first start in an
# emulated guest takes seconds (bounded wait: 60 s).
wait_live() {
  local name=$1
  for _ in $(seq 1200); do
    grep -q "Capturing on" "$OUT/$name.dumpcap" 2>/dev/null && return 0
    kill -0 "${cap[$name]}" 2>/dev/null || break
    sleep 0.05
  done
  echo "FAIL: $name: dumpcap did not start capturing:"; cat "$OUT/$name.dumpcap"; fail=1
  return 1
}

# run_rpcs NAME PORT SERVER_FLAGS: 5 RPCs with a use_rdma client while the capture is on.
run_rpcs() {
  local name=$1 port=$2 sflags=$3
  RRPC_PERF_PORT=$port tools/run-rdma-performance --server-flags="$sflags" --use_rdma=true \
    --test_seconds=0 --test_iterations=5 >"$OUT/$name.run" 2>&1 || {
    echo "FAIL: $name: the RPCs failed:"; tail -5 "$OUT/$name.run"; fail=1; }
  if ! kill -0 "${cap[$name]}" 2>/dev/null; then
    echo "FAIL: $name: the run outlasted the capture (raise CAPTURE_SECONDS)"; fail=1
  fi
}

# decode NAME: wait for the capture to end, then decode it (a summary and the full tree).
decode() {
  local name=$1
  wait "${cap[$name]}" 2>/dev/null
  tshark -r "$OUT/$name.pcap" -o tcp.try_heuristic_first:TRUE >"$OUT/$name.summary" 2>&1
  tshark -r "$OUT/$name.pcap" -o tcp.try_heuristic_first:TRUE -V >"$OUT/$name.decode" 2>&1
}

want() { # want NAME LABEL...: each [LABEL] must appear in NAME's summary
  local name=$1; shift
  local missing=0
  for l in "$@"; do
    grep -q "\[$l\]" "$OUT/$name.summary" || { echo "FAIL: $name: no frame decoded as [$l]"; fail=1; missing=1; }
  done
  if [ $missing = 1 ]; then
    echo "   dumpcap said:"; sed 's/^/     /' "$OUT/$name.dumpcap"
    echo "   tshark printed:"; head -20 "$OUT/$name.summary" | sed "s/^/     /"
    echo "   the run printed:"; tail -8 "$OUT/$name.run" | sed "s/^/     /"
  fi
  # TCP's own notes (SYN, FIN, the RST of the readiness probe) are group
  # Sequence; anything else, and any malformed packet, is a decoding problem.
  if grep -iE 'malformed|expert info' "$OUT/$name.decode" | grep -vq '/Sequence)'; then
    echo "FAIL: $name: malformed packets or expert errors:"
    grep -iE 'malformed|expert info' "$OUT/$name.decode" | grep -v '/Sequence)' | head -5
    fail=1
  fi
}

# The RDMA handshake on 8301, a server that declines it on 8302; the runs one after the other.
start_capture rdma 8301
start_capture decline 8302
if wait_live rdma && wait_live decline; then
  run_rpcs rdma 8301 "--use_rdma=true"
  run_rpcs decline 8302 "--use_rdma=false"
fi
decode rdma
decode decline
want rdma SMC-R-Proposal SMC-R-Accept SMC-R-Confirm
grep -q "transport=RDMA" "$OUT/rdma.run" || { echo "FAIL: rdma: the RPCs did not go over RDMA"; fail=1; }
want decline SMC-R-Proposal SMC-Decline
grep -q "transport=TCP" "$OUT/decline.run" || { echo "FAIL: decline: the RPCs did not fall back to TCP"; fail=1; }

echo "-- tshark on the RDMA handshake:"; grep -E "SMC" "$OUT/rdma.summary" | sed 's/^/   /'
echo "-- tshark on the declined handshake:"; grep -E "SMC" "$OUT/decline.summary" | sed 's/^/   /'
[ $fail -eq 0 ] && echo "live capture: PASS" || echo "live capture: FAIL"
exit $fail
