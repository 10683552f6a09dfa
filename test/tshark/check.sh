#!/bin/sh
# test/tshark/check.sh - checks that Wireshark's SMC dissector decodes the CLC
# messages rrpc ENCODES (Proposal, Accept, Confirm, Decline, v1 layouts with
# rrpc's extension bytes) as SMC CLC, with no malformed-packet or expert
# error. Run from anywhere; it works from the repository root.
#
#   sh test/tshark/check.sh [--keep DIR]
#
# The bytes come from the make-built test binary (ClcTshark.Export* in
# test/smc_clc_unittest.cc writes them when RRPC_CLC_TSHARK_OUT is set),
# text2pcap wraps them in a dummy TCP stream 10.77.0.2:40000 <-> 10.77.0.1:45001
# and tshark decodes them with the SMC heuristic first (without it the
# heuristic may never see the stream). Needs tshark and text2pcap (Debian:
# tshark, wireshark-common). Exit status 0 = pass.
set -eu

TSHARK_CHECK="tshark check"
. "$(dirname "$0")/lib.sh"
tshark_start "$@"
tshark_export smc_clc_unittest RRPC_CLC_TSHARK_OUT 'ClcTshark.*' "$tmp/clc.txt"

# "<name> <c2s|s2c> <hex>" -> text2pcap input: a direction mark (I = client
# to server with the addresses below), then offset + 16 bytes per line.
awk "$TSHARK_AWK_DUMP"'
{
  print ($2 == "c2s") ? "I" : "O";
  dump($3);
}' "$tmp/clc.txt" >"$tmp/clc.dump"
text2pcap -q -D -T 40000,45001 -4 10.77.0.2,10.77.0.1 "$tmp/clc.dump" "$tmp/rrpc-clc.pcap" \
  >"$tmp/text2pcap.log" 2>&1 || { cat "$tmp/text2pcap.log" >&2; exit 1; }

tshark -r "$tmp/rrpc-clc.pcap" -o tcp.try_heuristic_first:TRUE -V >"$tmp/decode.txt" 2>/dev/null
tshark -r "$tmp/rrpc-clc.pcap" -o tcp.try_heuristic_first:TRUE >"$tmp/summary.txt" 2>/dev/null
if [ -n "$keep" ]; then
  mkdir -p "$keep"
  cp "$tmp/rrpc-clc.pcap" "$tmp/decode.txt" "$tmp/summary.txt" "$tmp/clc.txt" "$keep/"
fi

fail=0
expect() { # expect <pattern> <what>: a fixed string that must appear in the -V decode
  if ! grep -qF -- "$1" "$tmp/decode.txt"; then
    echo "FAIL: $2: no line with '$1'" >&2
    fail=1
  fi
}

# One frame per message, in order, each decoded as its CLC type.
types=$(tshark -r "$tmp/rrpc-clc.pcap" -o tcp.try_heuristic_first:TRUE -T fields \
  -e smc.clc_msg 2>/dev/null | tr '\n' ' ')
if [ "$types" != "1 2 3 4 " ]; then
  echo "FAIL: CLC message types per frame are '$types', want '1 2 3 4 '" >&2
  fail=1
fi
for s in SMC-R-Proposal SMC-R-Accept SMC-R-Confirm SMC-Decline; do
  grep -q "\[$s\]" "$tmp/summary.txt" || { echo "FAIL: no frame shown as [$s]" >&2; fail=1; }
done
tshark_no_malformed "$tmp/decode.txt"

# The fields, including where rrpc's extension bytes land.
expect "SMC Length: 92" "Proposal length"
expect "SMCv1 IP Subnet Extension Offset: 0x0028" "Proposal IP-area offset"
expect "Outgoing Interface Subnet Mask: 10.77.0.0" "Proposal IPv4 subnet"
expect "Outgoing Interface Subnet Mask Number of Significant Bits: 24" "Proposal prefix length"
expect "Reserved: 0101" "Proposal rrpc feature flags + wire version"
expect "IPv6 Prefix Count: 0" "Proposal IPv6 prefix count"
expect "Server QP Number: 0x123456" "Accept QPN"
expect "Server RMB Rkey: 0xdeadbeef" "Accept rkey"
expect "Server RMB Element Alert Token: 0x01020304" "Accept token"
expect "Server RMB Buffers Size (Compressed Notation): 4 (Size: 256k)" "Accept ring code"
expect "QP MTU Value (enumerated value): 3 (MTU: 1024)" "MTU"
expect "Reserved: 07" "Accept/Confirm rrpc receive-WR depth (log2)"
expect "Reserved: 01" "Accept/Confirm rrpc feature flags"
expect "Initial PSN: 0xabcdef" "Accept PSN"
expect "First Contact: True" "Accept first contact"
expect "Client QP Number: 0x000017" "Confirm QPN"
expect "Client RMB Buffers Size (Compressed Notation): 15" "Confirm ring code 15"
expect "Peer Diagnosis Information: 0x030c0000" "Decline code"

cat "$tmp/summary.txt"
echo "-- rrpc extension bytes as tshark $(tshark --version 2>/dev/null | head -1 | awk '{print $3}') shows them:"
grep -E 'Reserved: (0101|07|01)$|Buffers Size' "$tmp/decode.txt" | sed 's/^ */   /'
if [ "$fail" -ne 0 ]; then
  echo "tshark check: FAILED" >&2
  exit 1
fi
echo "tshark check: PASS (4 CLC frames decoded, no malformed or expert lines)"
