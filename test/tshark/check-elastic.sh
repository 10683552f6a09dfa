#!/bin/sh
# test/tshark/check-elastic.sh - checks that Wireshark's SMC-R dissection
# leaves rrpc's elastic-ring control messages (GRANT, RETIRE, WANT,
# HANDBACK; docs/elastic-rings.md) alone: each one, carried as the payload
# of an RC SEND-with-immediate in a RoCEv2 packet, must show as InfiniBand
# with plain data after it, never as SMC and never malformed; and a CDC in
# the same kind of packet must still decode as SMC's CDC (so the check does
# see the SMC-R heuristic at work). Run from anywhere.
#
#   sh test/tshark/check-elastic.sh [--keep DIR]
#
# The bytes come from the make-built test binary (GrantTshark.Export in
# test/rdma_grant_unittest.cc writes them when RRPC_GRANT_TSHARK_OUT is set);
# text2pcap wraps each in UDP to port 4791 behind a 12-byte BTH (opcode 5,
# RC SEND Only with Immediate) and a 4-byte immediate, with a 4-byte ICRC
# after it. Needs tshark and text2pcap. Exit status 0 = pass.
set -eu

TSHARK_CHECK="tshark elastic check"
. "$(dirname "$0")/lib.sh"
tshark_start "$@"
tshark_export rdma_grant_unittest RRPC_GRANT_TSHARK_OUT 'GrantTshark.*' "$tmp/msgs.txt"

# "<name> <dir> <hex>" -> text2pcap input: BTH (opcode 5, MigReq, P_Key
# 0xffff, QP 0x11, AckReq, PSN = line number), immediate 0, the message,
# ICRC 0.
awk "$TSHARK_AWK_DUMP"'
{
  print "I";
  dump(sprintf("0540ffff00000011800000%02x", NR) "00000000" $3 "00000000");
}' "$tmp/msgs.txt" >"$tmp/msgs.dump"
text2pcap -q -D -u 50000,4791 -4 10.77.0.2,10.77.0.1 "$tmp/msgs.dump" "$tmp/rrpc-elastic.pcap" \
  >"$tmp/text2pcap.log" 2>&1 || { cat "$tmp/text2pcap.log" >&2; exit 1; }

tshark -r "$tmp/rrpc-elastic.pcap" -V >"$tmp/decode.txt" 2>/dev/null
tshark -r "$tmp/rrpc-elastic.pcap" -T fields -e frame.protocols -e smc.llc_msg \
  >"$tmp/fields.txt" 2>/dev/null
if [ -n "$keep" ]; then
  mkdir -p "$keep"
  cp "$tmp/rrpc-elastic.pcap" "$tmp/decode.txt" "$tmp/fields.txt" "$tmp/msgs.txt" "$keep/"
fi

fail=0
names=$(awk '{print $1}' "$tmp/msgs.txt" | tr '\n' ' ')
if [ "$names" != "cdc grant retire want handback " ]; then
  echo "FAIL: exported messages are '$names'" >&2
  fail=1
fi
# Frame 1 (the CDC) is SMC's CDC; frames 2..5 are InfiniBand + data only.
line=1
while IFS="$(printf '\t')" read -r protos llc; do
  case $line in
  1)
    case $protos in *infiniband:smc*) ;; *) echo "FAIL: the CDC is not SMC ($protos)" >&2; fail=1 ;; esac
    [ "$llc" = "254" ] || [ "$llc" = "0xfe" ] || { echo "FAIL: the CDC shows LLC type '$llc', want 254" >&2; fail=1; }
    ;;
  *)
    [ "$protos" = "eth:ethertype:ip:udp:infiniband:data" ] ||
      { echo "FAIL: frame $line decodes as '$protos', want ...:infiniband:data" >&2; fail=1; }
    [ -z "$llc" ] || { echo "FAIL: frame $line shows an SMC LLC type '$llc'" >&2; fail=1; }
    ;;
  esac
  line=$((line + 1))
done <"$tmp/fields.txt"
[ "$line" -eq 6 ] || { echo "FAIL: $((line - 1)) frames decoded, want 5" >&2; fail=1; }
tshark_no_malformed "$tmp/decode.txt"
grep -qF "Opcode: Reliable Connection (RC) - SEND Only with Immediate (5)" "$tmp/decode.txt" ||
  { echo "FAIL: the packets are not RC SEND with immediate" >&2; fail=1; }

if [ "$fail" -ne 0 ]; then
  echo "tshark elastic check: FAILED" >&2
  exit 1
fi
echo "tshark elastic check: PASS (CDC decoded as SMC; GRANT, RETIRE, WANT, HANDBACK skipped as data, nothing malformed)"
