#!/usr/bin/env bash
# dlopen_test.sh - librrpc.so loaded by dlopen() after a program started (a
# plugin, a language binding) serves and makes calls: its initial-exec
# thread-local (src/rrpc/internal/loop.h) must fit glibc's surplus static
# TLS. Needs the make build (build/librrpc.so); compiles its two programs.
set -u
cd "$(dirname "$0")/../.."
B=${RRPC_BUILD:-build}
[ -e "$B/librrpc.so" ] || { echo "FAILED: $B/librrpc.so is missing (make all)"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
CC=${CC:-cc}
lib=$(cd "$B" && pwd)
$CC -std=c11 -Wall -Wextra -Werror -fPIC -shared -Isrc test/tools/dlopen/plugin.c -o "$dir/plugin.so" \
  -L"$lib" -lrrpc -Wl,-rpath,"$lib" || { echo "FAILED: plugin build"; exit 1; }
$CC -std=c11 -Wall -Wextra -Werror test/tools/dlopen/main.c -o "$dir/main" -ldl || { echo "FAILED: main build"; exit 1; }
if readelf -d "$dir/main" | grep -q librrpc; then echo "FAILED: main links librrpc"; exit 1; fi
timeout 60 "$dir/main" "$dir/plugin.so"
