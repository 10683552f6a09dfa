#!/bin/sh
# bench/remote_write_pair_ab.sh A B - build/bench/remote_write_pair built two
# ways (A: the baseline, B: the change), alternated in one boot of the
# Soft-RoCE VM so both see the same machine. Each of RUNS rounds runs A then
# B three ways: 2 threads writing SIZE bytes to two peers over two
# connections, 1 thread alone, and "mixed" (thread 0 writes 1 MiB, thread 1
# 4 KiB, one write in flight each: thread 1's latency shows whether its
# posts wait for thread 0's). Prints each run's lines, then per round B/A of
# ops/s and, for mixed, of thread 1's median latency. Run it through
# tools/rxe-vm. Env: RUNS (3), SECS (4 per run), SIZE (65536), DEPTH (4),
# ADDR (10.99.0.1).
set -u
A=$1 B=$2
RUNS=${RUNS:-3} SECS=${SECS:-4} SIZE=${SIZE:-65536} DEPTH=${DEPTH:-4} ADDR=${ADDR:-10.99.0.1}
run() { # run BIN ARGS... -> its output, each line prefixed with the binary's name
    bin=$1
    shift
    "$bin" --seconds="$SECS" --host="$ADDR" "$@" 2> /dev/null | sed "s|^|$(basename "$bin") |"
}
field() { sed -n "s/.* $1=\([0-9.-]*\).*/\1/p" | head -n 1; }
ratio() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "n/a" }'; }
r=1
while [ "$r" -le "$RUNS" ]; do
    for mode in 2 1; do
        oa=$(run "$A" --threads=$mode --size="$SIZE" --depth="$DEPTH") ob=$(run "$B" --threads=$mode --size="$SIZE" --depth="$DEPTH")
        printf '%s\n%s\n' "$oa" "$ob"
        echo "round $r threads=$mode ops_ratio=$(ratio "$(echo "$oa" | field ops_per_s)" "$(echo "$ob" | field ops_per_s)")"
    done
    oa=$(run "$A" --threads=2 --size=1048576 --size_b=4096 --depth=1)
    ob=$(run "$B" --threads=2 --size=1048576 --size_b=4096 --depth=1)
    printf '%s\n%s\n' "$oa" "$ob"
    la=$(echo "$oa" | grep ' t1 ' | field lat_p50_us) lb=$(echo "$ob" | grep ' t1 ' | field lat_p50_us)
    echo "round $r mixed ops_ratio=$(ratio "$(echo "$oa" | field ops_per_s)" "$(echo "$ob" | field ops_per_s)") small_p50_ratio=$(ratio "$la" "$lb")"
    r=$((r + 1))
done
