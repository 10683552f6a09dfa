// zerocopy_forward_test.cc - with --rdma_recv_zerocopy, a proxy forwards
// the 64 KiB attachment it received (a slice of one connection's receive
// ring) on another RDMA connection, zero-copy. The slice's send completion
// must come back promptly on that other connection too, or the source
// connection's ring stays held and its calls stall after a few (issue 13,
// item 12: one "ring slice" predicate for every connection).
#include <gtest/gtest.h>

#include <string>

#include "rrpc/rrpc.h"
#include "test/common/test_util.h"
#include "test/rdma/rdma_test_util.h"
#include "test/rdma/tsan_suppressions.h"

using rrpc_test::rdma_test_addr;

namespace {

using rrpc_rdma_test::echo_handler;

// The proxy: the request attachment, shared (not copied), goes to the
// backend; the backend's answer comes back.
void forward_handler(void *arg, rrpc_server_call *call) {
  rrpc_channel *backend = static_cast<rrpc_channel *>(arg);
  rrpc_controller *in = rrpc_server_call_controller(call);
  rrpc_controller *out;
  rrpc_controller_new(&out);
  rrpc_iobuf_append_iobuf(rrpc_controller_request_attachment(out), rrpc_controller_request_attachment(in));
  rrpc_iobuf *resp;
  rrpc_iobuf_new(&resp);
  int rc = rrpc_channel_call(backend, "test.Echo", "Echo", out, rrpc_server_call_request(call), resp, nullptr,
                             nullptr);
  if (rc == 0)
    rrpc_iobuf_append_iobuf(rrpc_controller_response_attachment(in), rrpc_controller_response_attachment(out));
  rrpc_server_call_respond(call, rc == 0 ? resp : nullptr);
  rrpc_iobuf_free(resp);
  rrpc_controller_free(out);
}

rrpc_channel *channel_to(int port) {
  rrpc_channel_options o = {};
  o.use_rdma = 1;
  o.timeout_ms = 5000;
  o.connect_timeout_ms = 5000;
  rrpc_channel *ch = nullptr;
  rrpc_channel_new((rdma_test_addr() + ":" + std::to_string(port)).c_str(), &o, &ch);
  return ch;
}

TEST(ZeroCopyForward, ProxyForwardsReceivedAttachmentsWithoutStalling) {
  rrpc_rdma_options ro;
  rrpc_rdma_options_init(&ro);
  ro.recv_zerocopy = 1;
  ro.zerocopy_min_size = 16 * 1024;
  ASSERT_EQ(rrpc_rdma_global_init(&ro), 0);

  rrpc_server_options so = {};
  so.use_rdma = 1;
  rrpc_server *backend;
  ASSERT_EQ(rrpc_server_new(&so, &backend), 0);
  rrpc_server_add_method(backend, "test.Echo", "Echo", echo_handler, nullptr);
  ASSERT_EQ(rrpc_server_start(backend, (rdma_test_addr() + ":0").c_str()), 0);
  rrpc_channel *to_backend = channel_to(rrpc_server_port(backend));
  ASSERT_NE(to_backend, nullptr);

  rrpc_server_options po = {};
  po.use_rdma = 1;
  po.handlers_in_pool = 1;  // the handler waits for the backend
  rrpc_server *proxy;
  ASSERT_EQ(rrpc_server_new(&po, &proxy), 0);
  rrpc_server_add_method(proxy, "test.Proxy", "Forward", forward_handler, to_backend);
  ASSERT_EQ(rrpc_server_start(proxy, (rdma_test_addr() + ":0").c_str()), 0);
  rrpc_channel *ch = channel_to(rrpc_server_port(proxy));
  ASSERT_NE(ch, nullptr);

  const int kCalls = 40;  // the stall showed after 15
  int ok = 0, rdma = 0;
  for (int i = 0; i < kCalls; i++) {
    std::string att = rrpc_test::pattern(64 * 1024, (unsigned)i), ratt, err;
    int used_rdma = 0;
    int rc = rrpc_rdma_test::echo(ch, "x", att, &ratt, &used_rdma, &err, "test.Proxy", "Forward");
    if (rc == 0 && ratt == att) ok++;
    rdma += used_rdma;
    if (rc != 0) printf("call %d failed: %s\n", i, err.c_str());
    if (rc != 0) break;  // after a stall every further call would wait its timeout
  }
  printf("zero-copy forward: %d of %d proxied 64 KiB calls intact (%d over RDMA)\n", ok, kCalls, rdma);
  EXPECT_EQ(ok, kCalls);
  EXPECT_EQ(rdma, ok);
  rrpc_channel_free(ch);
  rrpc_server_stop(proxy);
  rrpc_server_free(proxy);
  rrpc_channel_free(to_backend);
  rrpc_server_stop(backend);
  rrpc_server_free(backend);
}

}  // namespace
