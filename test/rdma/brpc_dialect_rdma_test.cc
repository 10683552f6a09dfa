// brpc_dialect_rdma_test.cc - brpc's RDMA dialect end to end on a verbs
// device (issue 8): an rrpc client in brpc's dialect (its channel's
// rdma_dialect; the process-wide --rdma_dialect does the same) (brpc's hello
// v2, SEND_WITH_IMM into posted receive blocks, immediate-data credits)
// calls an rrpc server with use_rdma, which recognises brpc's hello and
// serves the connection in that dialect. Attachments from 0 B to 16 MiB
// (block-size edges included) come back intact, the connection reports
// RDMA, and the RDMA byte counters (not TCP) carry the bytes.
#include <gtest/gtest.h>
#include <errno.h>
#include <stdio.h>

#include <cstring>
#include <string>

#include "rrpc/rrpc.h"
#include "test/common/test_util.h"
#include "test/rdma/rdma_test_util.h"
#include "test/rdma/tsan_suppressions.h"

using rrpc_test::rdma_test_addr;

namespace {

using rrpc_rdma_test::echo_handler;
using rrpc_rdma_test::tcp_bytes_on_port;

struct Echoed {
  int rc, used_rdma;
  bool same;
};

Echoed echo_call(rrpc_channel *ch, size_t size) {
  std::string att = rrpc_test::pattern(size, static_cast<unsigned>(size)), ratt, err;
  Echoed e;
  e.rc = rrpc_rdma_test::echo(ch, "x", att, &ratt, &e.used_rdma, &err);
  if (e.rc != 0) fprintf(stderr, "call of %zu bytes: %s\n", size, err.c_str());
  e.same = ratt == att;
  return e;
}

rrpc_channel *open_channel(int port, int dialect) {
  rrpc_channel_options co = {};
  co.use_rdma = 1;
  co.rdma_dialect = dialect;
  co.timeout_ms = 60000;
  co.connect_timeout_ms = 5000;
  rrpc_channel *ch = nullptr;
  return rrpc_channel_new((rdma_test_addr() + ":" + std::to_string(port)).c_str(), &co, &ch) == 0 ? ch : nullptr;
}

class BrpcDialect : public ::testing::Test {};

TEST_F(BrpcDialect, ClientAndServerCarryAttachmentsOverRdma) {
  ASSERT_EQ(1, rrpc_rdma_available()) << "needs an RDMA device";
  rrpc_server_options so = {};
  so.use_rdma = 1;
  rrpc_server *server = nullptr;
  ASSERT_EQ(0, rrpc_server_new(&so, &server));
  ASSERT_EQ(0, rrpc_server_add_method(server, "test.Echo", "Echo", echo_handler, nullptr));
  ASSERT_EQ(0, rrpc_server_start(server, (rdma_test_addr() + ":0").c_str()));
  int port = rrpc_server_port(server);
  rrpc_channel *ch = open_channel(port, RRPC_RDMA_DIALECT_BRPC);
  ASSERT_NE(nullptr, ch);
  rrpc_rdma_stats s0;
  rrpc_rdma_get_stats(&s0);
  uint64_t total = 0;
  for (size_t size : {size_t{0}, size_t{1}, size_t{8191}, size_t{8193}, size_t{1} << 20, size_t{16} << 20}) {
    Echoed e = echo_call(ch, size);
    EXPECT_EQ(0, e.rc) << size;
    EXPECT_TRUE(e.same) << size;
    EXPECT_EQ(1, e.used_rdma) << size;
    total += size;
  }
  rrpc_rdma_stats s1;
  rrpc_rdma_get_stats(&s1);
  long long tcp = tcp_bytes_on_port(port);
  printf("brpc dialect: %llu attachment bytes each way; RDMA written %llu, received %llu; "
         "TCP bytes on the connection %lld; connections over RDMA +%llu\n",
         (unsigned long long)total, (unsigned long long)(s1.bytes_written - s0.bytes_written),
         (unsigned long long)(s1.bytes_received - s0.bytes_received), tcp,
         (unsigned long long)(s1.connections_rdma - s0.connections_rdma));
  // Both ends are in this process: each direction counts once per side.
  EXPECT_GE(s1.bytes_written - s0.bytes_written, 2 * total);
  EXPECT_GE(s1.bytes_received - s0.bytes_received, 2 * total);
  EXPECT_EQ(s0.connections_rdma + 2, s1.connections_rdma); // the client's and the server's
  EXPECT_LT(tcp, 4096); // only the hellos and the ACK went over TCP
  EXPECT_EQ(s0.cdc_sent, s1.cdc_sent); // no CDC: rrpc's own dialect was not used
  // Both ends' receive blocks and send slots are in the registered-memory stats.
  EXPECT_GE(s1.ring_bytes, 2u * 128 * 8192);
  EXPECT_GT(s1.slot_bytes, 0u);
  rrpc_channel_free(ch);

  // The same server serves rrpc's own dialect on the same port.
  rrpc_channel *imm = open_channel(port, RRPC_RDMA_DIALECT_IMM);
  ASSERT_NE(nullptr, imm);
  Echoed e = echo_call(imm, 100000);
  EXPECT_EQ(0, e.rc);
  EXPECT_TRUE(e.same);
  EXPECT_EQ(1, e.used_rdma);
  rrpc_rdma_stats s2;
  rrpc_rdma_get_stats(&s2);
  EXPECT_GT(s2.cdc_sent, s1.cdc_sent);
  rrpc_channel_free(imm);
  rrpc_server_free(server);
}

TEST_F(BrpcDialect, UnknownDialectIsRefusedClearly) {
  rrpc_channel_options co = {};
  co.use_rdma = 1;
  co.rdma_dialect = RRPC_RDMA_DIALECT_BRPC + 1;
  rrpc_channel *ch = nullptr;
  EXPECT_EQ(-EINVAL, rrpc_channel_new("127.0.0.1:1", &co, &ch));
  rrpc_rdma_options o;
  rrpc_rdma_options_init(&o);
  o.dialect = RRPC_RDMA_DIALECT_BRPC + 1;
  EXPECT_EQ(-EINVAL, rrpc_rdma_global_init(&o));
}

} // namespace
