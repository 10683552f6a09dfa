// brpc_peer_rdma_test.cc - issue 8: an rrpc server with use_rdma serves
// brpc_peer::Client (test/rdma/brpc_peer.h), a brpc-dialect client written
// from the spec with raw verbs and no rrpc code, so a rule of brpc's dialect
// that rrpc breaks symmetrically on its own two ends is caught here.
// Attachments 0 B .. 16 MiB (block edges included) come back intact; the
// server's counters show the bytes went over RDMA, not TCP.
#include <gtest/gtest.h>
#include <stdio.h>

#include <cstdlib>
#include <string>

#include "rrpc/rrpc.h"
#include "test/common/test_util.h"
#include "test/rdma/brpc_peer.h"
#include "test/rdma/tsan_suppressions.h"

namespace {

void echo(void *, rrpc_server_call *call) {
  rrpc_controller *c = rrpc_server_call_controller(call);
  rrpc_iobuf_append_iobuf(rrpc_controller_response_attachment(c), rrpc_controller_request_attachment(c));
  rrpc_server_call_respond(call, rrpc_server_call_request(call));
}

std::string device_name() {
  const char *d = getenv("RRPC_TEST_RDMA_DEV");
  return d ? d : "";
}

TEST(BrpcPeer, IndependentClientCallsRrpcServerOverRdma) {
  ASSERT_EQ(1, rrpc_rdma_available()) << "needs an RDMA device";
  rrpc_server_options so = {};
  so.use_rdma = 1;
  rrpc_server *server = nullptr;
  ASSERT_EQ(0, rrpc_server_new(&so, &server));
  ASSERT_EQ(0, rrpc_server_add_method(server, "test.Echo", "Echo", echo, nullptr));
  std::string addr = rrpc_test::rdma_test_addr();
  ASSERT_EQ(0, rrpc_server_start(server, (addr + ":0").c_str()));
  int port = rrpc_server_port(server);

  rrpc_rdma_stats s0;
  rrpc_rdma_get_stats(&s0);
  uint64_t total = 0;
  {
    brpc_peer::Client peer;
    ASSERT_TRUE(peer.connect(device_name(), addr, port)) << peer.error;
    const brpc_peer::Hello &h = peer.server_hello;
    printf("server hello: block %u sq %u rq %u lid %u qp %u\n", h.block_size, h.sq, h.rq, h.lid, h.qp_num);
    int64_t cid = 1;
    for (size_t size : {size_t{0}, size_t{1}, size_t{8191}, size_t{8193}, size_t{1} << 20, size_t{16} << 20}) {
      std::string att = rrpc_test::pattern(size, static_cast<unsigned>(size) + 7);
      brpc_peer::Response r;
      ASSERT_TRUE(peer.call("test.Echo", "Echo", "hello", att, cid++, &r)) << size << ": " << peer.error;
      EXPECT_EQ(0, r.meta.response().error_code()) << size << ": " << r.meta.response().error_text();
      EXPECT_EQ("hello", r.message) << size;
      EXPECT_TRUE(r.attachment == att) << size << " bytes came back different (" << r.attachment.size() << ")";
      total += size;
    }
    printf("peer: data WRs sent %llu received %llu, pure ACKs sent %llu received %llu\n",
           (unsigned long long)peer.data_wrs_sent, (unsigned long long)peer.data_wrs_received,
           (unsigned long long)peer.pure_acks_sent, (unsigned long long)peer.pure_acks_received);
    EXPECT_GE(peer.data_wrs_received, total / h.block_size);
  }
  rrpc_rdma_stats s1;
  rrpc_rdma_get_stats(&s1);
  printf("brpc peer: %llu attachment bytes each way; server RDMA written %llu, received %llu; "
         "connections over RDMA +%llu\n",
         (unsigned long long)total, (unsigned long long)(s1.bytes_written - s0.bytes_written),
         (unsigned long long)(s1.bytes_received - s0.bytes_received),
         (unsigned long long)(s1.connections_rdma - s0.connections_rdma));
  // Only the server is rrpc: each direction counts once.
  EXPECT_GE(s1.bytes_written - s0.bytes_written, total);
  EXPECT_GE(s1.bytes_received - s0.bytes_received, total);
  EXPECT_EQ(s0.connections_rdma + 1, s1.connections_rdma);
  EXPECT_EQ(s0.cdc_sent, s1.cdc_sent); // not rrpc's own dialect
  rrpc_server_free(server);
}

} // namespace
