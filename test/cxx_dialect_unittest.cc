// cxx_dialect_unittest.cc - rrpc::ChannelOptions::rdma_dialect: "imm" and
// "cursor" and "brpc" are taken (without use_rdma they change nothing: the
// channel talks TCP), unknown names make Init fail.
#include <gtest/gtest.h>

#include "rrpc/cxx/rrpc.h"

namespace {

int InitWith(const char *dialect) {
  rrpc::ChannelOptions o;
  o.rdma_dialect = dialect;
  rrpc::Channel ch;
  return ch.Init("127.0.0.1:1", &o);
}

TEST(CxxDialect, KnownDialectsAreTakenOthersRefused) {
  EXPECT_EQ(0, InitWith(""));
  EXPECT_EQ(0, InitWith("imm"));
  EXPECT_EQ(0, InitWith("brpc"));
  EXPECT_EQ(0, InitWith("cursor"));
  EXPECT_EQ(-1, InitWith("smc"));
}

} // namespace
