#!/bin/sh
# config_brpc.sh - configure the make build of rrpc; writes config.mk.
#
#   sh config_brpc.sh [--with-rdma] [--headers="DIR ..."] [--libs="DIR ..."]
#                     [--cc=CC] [--cxx=CXX]
#
# --headers/--libs add include and library search directories (brpc's script
# takes the same options). The script checks that every header the build
# needs is found and says which Debian package provides a missing one.
set -e

with_rdma=0
headers=""
libs=""
cc=${CC:-gcc}
cxx=${CXX:-g++}
for arg in "$@"; do
  case "$arg" in
    --with-rdma) with_rdma=1 ;;
    --headers=*) headers="${arg#--headers=}" ;;
    --libs=*) libs="${arg#--libs=}" ;;
    --cc=*) cc="${arg#--cc=}" ;;
    --cxx=*) cxx="${arg#--cxx=}" ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "config_brpc.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

cppflags=""
for d in $headers; do cppflags="$cppflags -I$d"; done
ldflags=""
for d in $libs; do ldflags="$ldflags -L$d"; done

missing=""
# need HEADER PACKAGE: fail later with one apt-get line naming every package.
need() {
  found=0
  for d in $headers /usr/include /usr/local/include; do
    [ -f "$d/$1" ] && found=1 && break
  done
  [ $found = 1 ] || missing="$missing $2"
}
need google/protobuf/message.h libprotobuf-dev
need gflags/gflags.h libgflags-dev
need glog/logging.h libgoogle-glog-dev
need gtest/gtest.h libgtest-dev
command -v protoc >/dev/null 2>&1 || missing="$missing protobuf-compiler"
[ $with_rdma = 1 ] && need infiniband/verbs.h libibverbs-dev && need rdma/rdma_cma.h librdmacm-dev
if [ -n "$missing" ]; then
  echo "config_brpc.sh: missing build dependencies; install them with:" >&2
  echo "  apt-get install -y$missing" >&2
  exit 1
fi

cat > config.mk <<EOM
# Written by config_brpc.sh $*; re-run it instead of editing.
CC := $cc
CXX := $cxx
WITH_RDMA := $with_rdma
EXTRA_CPPFLAGS :=$cppflags
EXTRA_LDFLAGS :=$ldflags
EOM
echo "config_brpc.sh: wrote config.mk (WITH_RDMA=$with_rdma, CC=$cc, CXX=$cxx)"
