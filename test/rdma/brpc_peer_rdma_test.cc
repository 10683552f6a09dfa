// brpc_peer_rdma_test.cc - issue 8: rrpc against brpc_peer::Peer
// (test/rdma/brpc_peer.h), a brpc-dialect peer written from the spec with
// raw verbs and no rrpc code, so a rule of brpc's dialect that rrpc breaks
// symmetrically on its own two ends is caught here. Both ways: the peer as
// client calls an rrpc server with use_rdma, and an rrpc client in brpc
// dialect calls the peer as server. Attachments 0 B .. 16 MiB (block edges
// included) come back intact; rrpc's counters show the bytes went over RDMA.
// As a server the peer takes ack_parse_ms to parse the client's ACK, as
// brpc's does, and fails a client whose data comes over RDMA before then
// (issue 31: every such connection closed at a real brpc server).
#include <gtest/gtest.h>
#include <stdio.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/rrpc.h"
#include "test/common/test_util.h"
#include "test/rdma/brpc_peer.h"
#include "test/rdma/tsan_suppressions.h"

namespace {

// The client's wait after its ACK (--rdma_brpc_ack_settle_us), well above
// the peer's parse time: a loaded CI machine may hold the peer's thread for
// a while between the ACK's arrival and the end of its parse time.
constexpr int kSettleUs = 400000;

class SettleEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    rrpc_rdma_options o;
    rrpc_rdma_options_init(&o);
    o.brpc_ack_settle_us = kSettleUs;
    ASSERT_EQ(0, rrpc_rdma_global_init(&o));
  }
};
::testing::Environment *const g_settle_env = ::testing::AddGlobalTestEnvironment(new SettleEnv);

void echo(void *, rrpc_server_call *call) {
  rrpc_controller *c = rrpc_server_call_controller(call);
  rrpc_iobuf_append_iobuf(rrpc_controller_response_attachment(c), rrpc_controller_request_attachment(c));
  rrpc_server_call_respond(call, rrpc_server_call_request(call));
}

std::string device_name() {
  const char *d = getenv("RRPC_TEST_RDMA_DEV");
  return d ? d : "";
}

const std::vector<size_t> kSizes = {0, 1, 8191, 8193, size_t{1} << 20, size_t{16} << 20};
// For a peer with 1 KiB blocks: its block's edges, and many WRs per message.
const std::vector<size_t> kSmallBlockSizes = {0, 1, 1023, 1025, 8193, size_t{1} << 20};

// The peer as client calls an rrpc server with use_rdma.
void peer_calls_rrpc_server(brpc_peer::Peer &peer, const std::vector<size_t> &sizes) {
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
    ASSERT_TRUE(peer.connect(device_name(), addr, port)) << peer.error;
    const brpc_peer::Hello &h = peer.peer_hello;
    printf("server hello: block %u sq %u rq %u lid %u qp %u\n", h.block_size, h.sq, h.rq, h.lid, h.qp_num);
    int64_t cid = 1;
    for (size_t size : sizes) {
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
    EXPECT_GE(peer.data_wrs_received, total / peer.recv_payload());
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

// An rrpc client in brpc dialect calls the peer as server.
void rrpc_client_calls_peer(brpc_peer::Peer &peer, const std::vector<size_t> &sizes) {
  ASSERT_EQ(1, rrpc_rdma_available()) << "needs an RDMA device";
  std::string addr = rrpc_test::rdma_test_addr();
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  socklen_t len = sizeof sa;
  ASSERT_EQ(0, bind(lfd, reinterpret_cast<sockaddr *>(&sa), sizeof sa));
  ASSERT_EQ(0, listen(lfd, 4));
  ASSERT_EQ(0, getsockname(lfd, reinterpret_cast<sockaddr *>(&sa), &len));
  int port = ntohs(sa.sin_port);

  rrpc_channel_options co = {};
  co.use_rdma = 1;
  co.rdma_dialect = RRPC_RDMA_DIALECT_BRPC;
  co.timeout_ms = 60000;
  co.connect_timeout_ms = 5000;
  co.max_retry = 0;
  rrpc_channel *ch = nullptr;
  ASSERT_EQ(0, rrpc_channel_new((addr + ":" + std::to_string(port)).c_str(), &co, &ch));
  // The channel connects on the first call; the peer accepts in its thread.
  bool served = false;
  const int calls = (int)sizes.size();
  std::thread t([&] {
    served = peer.accept(device_name(), lfd) && peer.serve(calls);
    if (!served) peer.hang_up(); // the client's calls end now, as at brpc
  });
  rrpc_rdma_stats s0;
  rrpc_rdma_get_stats(&s0);
  uint64_t total = 0;
  for (size_t size : sizes) {
    std::string att = rrpc_test::pattern(size, static_cast<unsigned>(size) + 11);
    rrpc_controller *c;
    rrpc_controller_new(&c);
    rrpc_iobuf *rq, *rs;
    rrpc_iobuf_new(&rq);
    rrpc_iobuf_new(&rs);
    rrpc_iobuf_append(rq, "ping", 4);
    rrpc_iobuf_append(rrpc_controller_request_attachment(c), att.data(), att.size());
    int rc = rrpc_channel_call(ch, "test.Echo", "Echo", c, rq, rs, nullptr, nullptr);
    EXPECT_EQ(0, rc) << size << ": " << rrpc_controller_error_text(c); // the peer's own error: after join
    EXPECT_EQ("ping", rrpc_test::iobuf_string(rs)) << size;
    EXPECT_TRUE(rrpc_test::iobuf_string(rrpc_controller_response_attachment(c)) == att) << size;
    EXPECT_EQ(1, rrpc_controller_used_rdma(c)) << size;
    total += size;
    rrpc_iobuf_free(rq);
    rrpc_iobuf_free(rs);
    rrpc_controller_free(c);
    if (rc != 0) break;
  }
  rrpc_rdma_stats s1;
  rrpc_rdma_get_stats(&s1);
  t.join(); // bounded: every wait of the peer is (kWaitMs)
  close(lfd);
  EXPECT_TRUE(served) << peer.error;
  printf("rrpc client -> brpc peer: %llu attachment bytes each way; client RDMA written %llu, received %llu; "
         "peer data WRs sent %llu received %llu, pure ACKs sent %llu received %llu\n",
         (unsigned long long)total, (unsigned long long)(s1.bytes_written - s0.bytes_written),
         (unsigned long long)(s1.bytes_received - s0.bytes_received), (unsigned long long)peer.data_wrs_sent,
         (unsigned long long)peer.data_wrs_received, (unsigned long long)peer.pure_acks_sent,
         (unsigned long long)peer.pure_acks_received);
  EXPECT_GE(s1.bytes_written - s0.bytes_written, total);
  EXPECT_GE(s1.bytes_received - s0.bytes_received, total);
  EXPECT_EQ(s0.connections_rdma + 1, s1.connections_rdma); // the channel's one connection
  EXPECT_EQ(s0.cdc_sent, s1.cdc_sent);
  EXPECT_EQ(uint64_t(calls), peer.requests_served);
  rrpc_channel_free(ch);
}

TEST(BrpcPeer, IndependentClientCallsRrpcServerOverRdma) {
  brpc_peer::Peer peer; // brpc's defaults
  peer_calls_rrpc_server(peer, kSizes);
}

TEST(BrpcPeer, RrpcClientInBrpcDialectCallsIndependentServer) {
  brpc_peer::Peer peer;
  rrpc_client_calls_peer(peer, kSizes);
}

// A brpc server that is slow to parse the ACK (its bthreads busy, or a
// loaded machine): the client's first data waits out the settle time, so
// none reaches the server's QP before the ACK is parsed. Before the wait
// existed the first request followed the ACK at once.
TEST(BrpcPeer, RrpcClientSendsNothingBeforeASlowServerParsedTheAck) {
  brpc_peer::Peer peer;
  peer.ack_parse_ms = 200;
  rrpc_client_calls_peer(peer, {0, 4096});
}

// The smallest valid SQ/RQ (16: windows of 13) and 1 KiB blocks: rrpc must
// size its windows from the peer's hello and cut WRs to the peer's block,
// or the peer sees a credit overrun, an RNR or a length error.
TEST(BrpcPeer, SmallPeerWindowsAndBlocksBothWays) {
  {
    brpc_peer::Peer peer(16, 16, 1024);
    peer_calls_rrpc_server(peer, kSmallBlockSizes);
  }
  brpc_peer::Peer peer(16, 16, 1024);
  rrpc_client_calls_peer(peer, kSmallBlockSizes);
}

} // namespace
