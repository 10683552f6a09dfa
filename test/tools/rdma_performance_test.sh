#!/usr/bin/env bash
# rdma_performance_test.sh - examples/rdma_performance over loopback TCP, as a brpc peer sees it:
#   1. the server's cpu_usage is brpc's format, a fraction of one CPU ("0.310"), read from the
#      raw baidu_std response by a hand-written client (brpc's client prints atof(..) * 100 %);
#   2. the client stops at once, saying why, when no server is reachable;
#   3. brpc's --protocol / --connection_type values it cannot honour are refused, and
#      --connection_type=pooled / short work;
#   4. --expected_qps paces the RPCs;
#   5. --servers takes a naming URL (list://) with --load_balancer, and a dead server in the
#      list costs no failed RPC (retried on the live one, then isolated);
#   6. a channel that cannot be set up: "N of M client threads could not start" says why.
# Needs the make build (build/examples/rdma_performance). Every run is bounded by `timeout`.
set -u
cd "$(dirname "$0")/../.."
BIN=${RRPC_PERF_BIN:-${RRPC_BUILD:-build}/examples/rdma_performance}
fails=0
check() { # check NAME CONDITION...
  if "${@:2}"; then echo "ok: $1"; else echo "FAILED: $1"; fails=$((fails + 1)); fi
}
dir=$(mktemp -d)
spid=
cleanup() { [ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

# Port 0: the server picks a free one and logs "rdma_performance server on port N" once it
# listens (polled, bounded: 200 x 50 ms).
"$BIN/server" --port=0 > "$dir/server.log" 2>&1 &
spid=$!
port=
for _ in $(seq 200); do
  port=$(sed -n 's/.*rdma_performance server on port \([0-9]*\).*/\1/p' "$dir/server.log")
  [ -n "$port" ] && break
  kill -0 $spid 2>/dev/null || break
  sleep 0.05
done
[ -n "$port" ] || { echo "FAILED: the server did not start:"; cat "$dir/server.log"; exit 1; }

# 1. The raw cpu_usage string of a few responses, over baidu_std by hand.
timeout 20 python3 - "$port" > "$dir/cpu" <<'PY'
import socket, struct, sys, time
def varint(n):
    out = b""
    while True:
        b = n & 0x7f; n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n: return out
def field(num, payload): return varint(num << 3 | 2) + varint(len(payload)) + payload
def read_varint(b, i):
    n = shift = 0
    while True:
        n |= (b[i] & 0x7f) << shift; shift += 7; i += 1
        if b[i - 1] < 0x80: return n, i
def recv_all(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk: raise SystemExit("connection closed")
        out += chunk
    return out
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
values = []
for cid in range(1, 4):
    meta = field(1, field(1, b"test.PerfTestService") + field(2, b"Test")) + varint(4 << 3) + varint(cid)
    req = bytes([0x08, 0x00])  # PerfTestRequest{echo_attachment: false}
    s.sendall(b"PRPC" + struct.pack(">II", len(meta) + len(req), len(meta)) + meta + req)
    hdr = recv_all(s, 12)
    body_size, meta_size = struct.unpack(">II", hdr[4:])
    body = recv_all(s, body_size)
    msg = body[meta_size:]
    if not msg or msg[0] != 0x0a: raise SystemExit("no cpu_usage in the response: %r" % body)
    n, i = read_varint(msg, 1)
    values.append(msg[i:i + n].decode())
    time.sleep(0.6)  # the server samples its CPU once a second
print("\n".join(values))
PY
check "server answers PerfTestService.Test by hand (exit $?)" [ -s "$dir/cpu" ]
check "cpu_usage is a fraction like brpc's ($(tr '\n' ' ' < "$dir/cpu"))" \
  bash -c "! grep -qvxE '[0-9]+\.[0-9]{3}' '$dir/cpu'"
check "no percent sign in cpu_usage" bash -c "! grep -q '%' '$dir/cpu'"

# 2. Nothing listens on port 1 of loopback: the client must stop at once.
t0=$SECONDS
timeout 30 "$BIN/client" --servers=127.0.0.1:1 --test_seconds=20 > "$dir/out" 2>&1
rc=$?
check "unreachable server: exit 1 (got $rc)" [ $rc -eq 1 ]
check "unreachable server: stops early ($((SECONDS - t0)) s of --test_seconds=20)" \
  [ $((SECONDS - t0)) -le 5 ]
check "unreachable server: says why" grep -q 'cannot reach 127.0.0.1:1' "$dir/out"

# 3. brpc's flags that cannot be honoured are refused, naming the value.
timeout 10 "$BIN/client" --servers=127.0.0.1:$port --protocol=http > "$dir/out" 2>&1
check "--protocol=http refused (exit $?)" grep -q 'protocol=http: rrpc speaks only baidu_std' "$dir/out"
timeout 10 "$BIN/client" --servers=127.0.0.1:$port --connection_type=long > "$dir/out" 2>&1
check "--connection_type=long refused" grep -q 'connection_type=long: brpc' "$dir/out"
for ct in pooled short; do
  timeout 30 "$BIN/client" --servers=127.0.0.1:$port --connection_type=$ct --test_iterations=100 \
    --test_seconds=0 --thread_num=2 --queue_depth=2 > "$dir/out" 2>&1
  rc=$?
  failed=$(sed -n 's/^summary:.* failed=\([0-9]*\).*/\1/p' "$dir/out")
  check "--connection_type=$ct: exit 0 (got $rc), no failed RPC (got ${failed:-none})" \
    test $rc -eq 0 -a "${failed:-1}" -eq 0
done

# 4. 50 RPCs a second for 2 s: about 100 (a loaded machine may fall behind, never ahead).
timeout 30 "$BIN/client" --servers=127.0.0.1:$port --expected_qps=50 --test_seconds=2 \
  --thread_num=2 --queue_depth=2 > "$dir/out" 2>&1
rc=$?
rpcs=$(sed -n 's/^summary:.* rpcs=\([0-9]*\) .*/\1/p' "$dir/out")
check "--expected_qps=50 for 2 s: exit 0 (got $rc)" [ $rc -eq 0 ]
check "--expected_qps=50 for 2 s: 40..110 RPCs (got ${rpcs:-none})" \
  test "${rpcs:-0}" -ge 40 -a "${rpcs:-0}" -le 110
# 5. A naming URL naming the live server and a dead one (port 1): every RPC succeeds.
timeout 30 "$BIN/client" --servers="list://127.0.0.1:1,127.0.0.1:$port" --load_balancer=rr \
  --test_iterations=200 --test_seconds=0 --thread_num=2 > "$dir/out" 2>&1
rc=$?
failed=$(sed -n 's/^summary:.* failed=\([0-9]*\).*/\1/p' "$dir/out")
rpcs=$(sed -n 's/^summary:.* rpcs=\([0-9]*\) .*/\1/p' "$dir/out")
check "--servers=list://... --load_balancer=rr: exit 0 (got $rc)" [ $rc -eq 0 ]
check "naming URL: no failed RPC (got ${failed:-none}) of ${rpcs:-none}" test "${failed:-1}" -eq 0 -a "${rpcs:-0}" -ge 200
timeout 10 "$BIN/client" --servers="list://127.0.0.1:$port" --load_balancer=nope > "$dir/out" 2>&1
check "--load_balancer=nope refused (exit $?)" grep -q 'nope' "$dir/out"

# 6. An RDMA runtime that refuses its options (a receive queue larger than any device's; flag
#    parsing cannot know the device's limit): no channel can be set up, and the last line says why.
timeout 10 "$BIN/client" --servers=127.0.0.1:$port --use_rdma=true --rdma_rq_size=100000000 \
  --thread_num=2 > "$dir/out" 2>&1
rc=$?
check "channel not set up: exit 1 (got $rc)" [ $rc -eq 1 ]
check "channel not set up: 'could not start' carries the reason ($(grep 'could not start' "$dir/out"))" \
  grep -q "^2 of 2 client threads could not start; cannot set up a channel to 127.0.0.1:$port: cannot start the RDMA runtime: .*EINVAL" "$dir/out"

[ $fails -eq 0 ]
