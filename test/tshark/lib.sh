# test/tshark/lib.sh - what the tshark checks share. A check sets `set -eu`
# and TSHARK_CHECK (its name, for messages), sources this file and calls:
#   tshark_start "$@"   cd to the repository root, take --keep DIR into
#                       $keep, require tshark and text2pcap (exit 2
#                       without), make $tmp (removed at exit)
#   tshark_export BINARY ENV FILTER OUT
#                       build test/BINARY with make and run its FILTER
#                       cases with ENV=OUT, where they write the encoded
#                       messages ("<name> <dir> <hex>" per line)
#   "$TSHARK_AWK_DUMP"  an awk function dump(hex) printing hex as
#                       text2pcap's offset + 16 bytes lines
#   tshark_no_malformed DECODE
#                       fail=1 when tshark's -V decode reports malformed
#                       packets or expert errors

tshark_start() {
  root=$(cd "$(dirname "$0")/../.." && pwd)
  cd "$root"
  keep=""
  if [ "${1:-}" = "--keep" ]; then keep=${2:?--keep needs a directory}; fi
  for tool in tshark text2pcap; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "$TSHARK_CHECK: $tool not found (apt-get install tshark wireshark-common)" >&2
      exit 2
    fi
  done
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT INT TERM
}

tshark_export() {
  build=${BUILD:-build}
  ${MAKE:-make} -s "$build/test/$1" >/dev/null
  env "$2=$4" "$build/test/$1" --gtest_filter="$3" >"$tmp/gtest.log" 2>&1 || {
    cat "$tmp/gtest.log" >&2
    echo "$TSHARK_CHECK: the encoder test failed" >&2
    exit 1
  }
}

TSHARK_AWK_DUMP='
function dump(hex,    i, j, n, line) {
  n = length(hex) / 2;
  for (i = 0; i < n; i += 16) {
    line = sprintf("%06x ", i);
    for (j = i; j < i + 16 && j < n; j++) line = line " " substr(hex, 2 * j + 1, 2);
    print line;
  }
  print "";
}'

tshark_no_malformed() {
  if grep -qiE 'malformed|expert info' "$1"; then
    echo "FAIL: tshark reports malformed packets or expert errors:" >&2
    grep -iE 'malformed|expert info' "$1" >&2
    fail=1
  fi
}
