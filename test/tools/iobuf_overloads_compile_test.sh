#!/usr/bin/env bash
# iobuf_overloads_compile_test.sh - brpc IOBuf overloads rrpc refuses must not
# compile: copy_to(IOBuf*) (brpc refuses it too; append_to is the call) and
# cutn/copy_to with any other object pointer, which would otherwise bind to
# the void* overloads and write over the object. Each snippet must fail with
# the deleted-function diagnostic; the control snippet (brpc's accepted
# forms) must compile, so a broken include path cannot pass for a refusal.
# Uses the compiler and flags of the make build (config.mk's CXX, or g++).
set -u
cd "$(dirname "$0")/../.."
CXX=${CXX:-$(sed -n 's/^CXX *:\?= *//p' config.mk 2>/dev/null | head -1)}
CXX=${CXX:-g++}
BUILD=${RRPC_BUILD:-build}
flags=(-std=c++17 -Wall -Wextra -Werror -fsyntax-only -Isrc -I. -I"$BUILD/gen" -D_GNU_SOURCE -x c++ -)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
prelude='#include <string>
#include <vector>
#include "rrpc/cxx/iobuf.h"
void f(rrpc::IOBuf& b, rrpc::IOBuf& other, std::string& s, std::vector<char>& v) {
  (void)other; (void)s; (void)v;'

compile() { printf '%s\n%s\n}\n' "$prelude" "$1" | timeout 120 "$CXX" "${flags[@]}" > "$dir/out" 2>&1; }

if compile 'char raw[4]; b.cutn(raw, 4); b.cutn(&s, 4); b.cutn(&other, 4); b.copy_to(&s, 4); b.copy_to(raw, 4, 1);
  b.append_to(&s, 4); b.append_to(&other, 4);'; then
  echo "ok: brpc's accepted forms compile"
else
  echo "FAILED: brpc's accepted forms do not compile:"; cat "$dir/out"; fails=$((fails + 1))
fi

for snippet in 'b.copy_to(&other, 4);' 'b.copy_to(&v, 4);' 'b.cutn(&v, 4);' 'b.copy_to(&other);'; do
  if compile "$snippet"; then
    echo "FAILED: compiled: $snippet"; fails=$((fails + 1))
  elif grep -q 'use of deleted function' "$dir/out"; then
    echo "ok: refused as deleted: $snippet"
  else
    echo "FAILED: refused, but not as a deleted function: $snippet"; cat "$dir/out"; fails=$((fails + 1))
  fi
done
[ "$fails" -eq 0 ] && echo PASS || { echo "FAIL ($fails)"; exit 1; }
