#!/bin/sh
# bench/remote_write_pair_ab.sh A B - build/bench/remote_write_pair built two
# ways (A: the baseline, B: the change), alternated in one boot of the
# Soft-RoCE VM so both see the same machine: for each of RUNS rounds, A and
# B with 2 threads (two connections to two peers), then with 1; each line,
# then per round B's ops/s over A's. Run it through tools/rxe-vm.
# Env: RUNS (3), SECS (4 per run), SIZE (65536), DEPTH (4), ADDR (10.99.0.1).
set -u
A=$1 B=$2
RUNS=${RUNS:-3} SECS=${SECS:-4} SIZE=${SIZE:-65536} DEPTH=${DEPTH:-4} ADDR=${ADDR:-10.99.0.1}
one() { # one BIN THREADS -> ops_per_s (and the line on stderr)
    line=$("$1" --threads="$2" --size="$SIZE" --depth="$DEPTH" --seconds="$SECS" --host="$ADDR" 2> /dev/null)
    echo "$(basename "$1") $line" >&2
    echo "$line" | sed -n 's/.*ops_per_s=\([0-9.]*\).*/\1/p'
}
r=1
while [ "$r" -le "$RUNS" ]; do
    for t in 2 1; do
        a=$(one "$A" "$t") b=$(one "$B" "$t")
        echo "round $r threads=$t ratio=$(awk -v a="${a:-0}" -v b="${b:-0}" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "n/a" }')" >&2
    done
    r=$((r + 1))
done
