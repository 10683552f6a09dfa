// builtin_rdma_test.cc - the builtin pages of an RDMA server on a real verbs
// device (Soft-RoCE in the VM, or a real NIC): a live RDMA connection is
// listed with its QPN, the peer's QPN, ring sizes, free window and credits;
// /rdma names the device and the GID in use; the RDMA counters move; and
// rrpc_stat prints the same. Pages are fetched over TCP with a raw HTTP
// client (the VM has no curl).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "rrpc/rrpc.h"
#include "test/rdma/tsan_suppressions.h"
#include "test/common/test_util.h"
#include "test/rdma/rdma_test_util.h"

using rrpc_test::rdma_test_addr;

namespace {

using rrpc_rdma_test::echo_handler;
using rrpc_rdma_test::http_get;

// The first integer after "key": in a JSON text, or -1.
long long json_num(const std::string &json, const std::string &key) {
  size_t at = json.find("\"" + key + "\":");
  if (at == std::string::npos) return -1;
  return std::strtoll(json.c_str() + at + key.size() + 3, nullptr, 10);
}

std::string rrpc_stat_path() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "rrpc_stat";
  self[n] = '\0';
  std::string p(self);
  for (int i = 0; i < 3; i++) p = p.substr(0, p.rfind('/'));  // build/test/rdma/x -> build
  return p + "/tools/rrpc_stat";
}

std::string run(const std::string &cmd) { return rrpc_test::command_output(cmd); }

TEST(BuiltinRdma, RdmaConnectionShowsQpnWindowAndCredits) {
  if (!rrpc_rdma_available()) GTEST_SKIP() << "no active RDMA port";
  rrpc_server_options so{};
  so.use_rdma = 1;
  rrpc_server *srv;
  ASSERT_EQ(0, rrpc_server_new(&so, &srv));
  ASSERT_EQ(0, rrpc_server_add_method(srv, "test.Echo", "Echo", echo_handler, nullptr));
  ASSERT_EQ(0, rrpc_server_start(srv, (rdma_test_addr() + ":0").c_str()));
  int port = rrpc_server_port(srv);
  rrpc_channel_options co{};
  co.use_rdma = 1;
  co.timeout_ms = 30000;
  co.connect_timeout_ms = 5000;
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new((rdma_test_addr() + ":" + std::to_string(port)).c_str(), &co, &ch));
  rrpc_rdma_stats before;
  rrpc_rdma_get_stats(&before);
  for (int i = 0; i < 10; i++) {
    rrpc_controller *c;
    rrpc_iobuf *rq;
    rrpc_controller_new(&c);
    rrpc_iobuf_new(&rq);
    rrpc_iobuf_append(rq, "ping", 4);
    ASSERT_EQ(0, rrpc_channel_call(ch, "test.Echo", "Echo", c, rq, nullptr, nullptr, nullptr));
    ASSERT_EQ(1, rrpc_controller_used_rdma(c));
    rrpc_iobuf_free(rq);
    rrpc_controller_free(c);
  }

  std::string conns = http_get(port, "/connections?format=json");
  size_t at = conns.find("\"transport\":\"RDMA\"");
  ASSERT_NE(std::string::npos, at) << conns;
  size_t b = conns.rfind('{', at), e = conns.find('}', at);
  ASSERT_TRUE(b != std::string::npos && e != std::string::npos) << conns;
  std::string row = conns.substr(b, e - b + 1);
  EXPECT_GT(json_num(row, "qpn"), 0) << row;
  EXPECT_GT(json_num(row, "peer_qpn"), 0) << row;
  EXPECT_NE(json_num(row, "qpn"), json_num(row, "peer_qpn")) << row;
  EXPECT_GT(json_num(row, "ring_size"), 0) << row;
  EXPECT_GT(json_num(row, "peer_ring_size"), 0) << row;
  // Idle after the calls: the whole peer ring is free and credits are back
  // within the ACK the peer still owes.
  EXPECT_GT(json_num(row, "window_free"), 0) << row;
  EXPECT_LE(json_num(row, "window_free"), json_num(row, "peer_ring_size")) << row;
  EXPECT_GT(json_num(row, "credits"), 0) << row;
  EXPECT_LE(json_num(row, "credits"), json_num(row, "credits_max")) << row;
  EXPECT_GE(json_num(row, "gid_index"), 0) << row;
  EXPECT_GT(json_num(row, "bytes_in"), 0) << row;
  EXPECT_NE(std::string::npos, row.find("\"state\":\"UP\"")) << row;
  EXPECT_NE(std::string::npos, row.find("\"dialect\":\"imm\"")) << row;

  std::string rdma = http_get(port, "/rdma?format=json");
  EXPECT_EQ(1, json_num(rdma, "device_open")) << rdma;
  EXPECT_GE(json_num(rdma, "rdma_connections"), 1) << rdma;
  EXPECT_NE(std::string::npos, rdma.find("\"gids\":[{\"device\":")) << rdma;
  EXPECT_GT(json_num(rdma, "pool_bytes"), 0) << rdma;

  // Counters moved with the calls.
  std::string vars = http_get(port, "/vars?prefix=rrpc_rdma_writes_total");
  size_t w = vars.find("rrpc_rdma_writes_total{device=\"");
  size_t colon = vars.find("} : ", w);
  ASSERT_TRUE(w != std::string::npos && colon != std::string::npos) << vars;
  EXPECT_GE(std::strtoull(vars.c_str() + colon + 4, nullptr, 10), before.writes + 10) << vars;

  // rrpc_stat shows the same connection, smcss-style.
  std::string tool = rrpc_stat_path();
  if (access(tool.c_str(), X_OK) == 0) {
    std::string out = run(tool + " " + rdma_test_addr() + ":" + std::to_string(port) + " connections -d");
    EXPECT_NE(std::string::npos, out.find("RDMA")) << out;
    EXPECT_NE(std::string::npos, out.find(std::to_string(json_num(row, "qpn")))) << out;
    out = run(tool + " " + rdma_test_addr() + ":" + std::to_string(port) + " devices");
    EXPECT_NE(std::string::npos, out.find("PoolBytes")) << out;
    std::printf("%s\n", out.c_str());
  } else {
    ADD_FAILURE() << tool << " is missing (make tools)";
  }
  rrpc_channel_free(ch);
  rrpc_server_free(srv);
}

// "wrap:count" of "key" in a JSON row: {wrap, count}, or {-1, -1}.
std::pair<long, long> json_cursor(const std::string &row, const std::string &key) {
  size_t at = row.find("\"" + key + "\":\"");
  if (at == std::string::npos) return {-1, -1};
  const char *p = row.c_str() + at + key.size() + 4;
  char *end;
  long w = std::strtol(p, &end, 10);
  if (*end != ':') return {-1, -1};
  return {w, std::strtol(end + 1, nullptr, 10)};
}

// The cursor dialect's connection in /connections and rrpc_stat -d: the
// dialect, both sides' cursors (wrap:count) and the CDC flag bytes.
TEST(BuiltinRdma, CursorConnectionShowsDialectCursorsAndFlags) {
  if (!rrpc_rdma_available()) GTEST_SKIP() << "no active RDMA port";
  rrpc_server_options so{};
  so.use_rdma = 1;
  rrpc_server *srv;
  ASSERT_EQ(0, rrpc_server_new(&so, &srv));
  ASSERT_EQ(0, rrpc_server_add_method(srv, "test.Echo", "Echo", echo_handler, nullptr));
  ASSERT_EQ(0, rrpc_server_start(srv, (rdma_test_addr() + ":0").c_str()));
  int port = rrpc_server_port(srv);
  rrpc_channel_options co{};
  co.use_rdma = 1;
  co.rdma_dialect = RRPC_RDMA_DIALECT_CURSOR;
  co.timeout_ms = 30000;
  co.connect_timeout_ms = 5000;
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new((rdma_test_addr() + ":" + std::to_string(port)).c_str(), &co, &ch));
  for (int i = 0; i < 10; i++) {
    rrpc_controller *c;
    rrpc_iobuf *rq;
    rrpc_controller_new(&c);
    rrpc_iobuf_new(&rq);
    rrpc_iobuf_append(rq, "ping", 4);
    ASSERT_EQ(0, rrpc_channel_call(ch, "test.Echo", "Echo", c, rq, nullptr, nullptr, nullptr));
    ASSERT_EQ(1, rrpc_controller_used_rdma(c));
    rrpc_iobuf_free(rq);
    rrpc_controller_free(c);
  }
  std::string conns = http_get(port, "/connections?format=json");
  size_t at = conns.find("\"dialect\":\"cursor\"");
  ASSERT_NE(std::string::npos, at) << conns;
  size_t b = conns.rfind('{', at), e = conns.find('}', at);
  ASSERT_TRUE(b != std::string::npos && e != std::string::npos) << conns;
  std::string row = conns.substr(b, e - b + 1);
  // The server answered every request: it consumed all the client wrote,
  // and wrote answers (its producer cursor) the client's consumer cursor
  // may not have told yet.
  auto prod = json_cursor(row, "prod"), cons = json_cursor(row, "cons");
  auto peer_prod = json_cursor(row, "peer_prod"), peer_cons = json_cursor(row, "peer_cons");
  EXPECT_EQ(0, prod.first) << row;
  EXPECT_GT(prod.second, 0) << row;
  EXPECT_GT(cons.second, 0) << row;
  EXPECT_EQ(cons, peer_prod) << row;
  EXPECT_GE(peer_cons.first, 0) << row;
  EXPECT_LE(peer_cons.second, prod.second) << row;
  EXPECT_NE(std::string::npos, row.find("\"tx_flags\":\"00:00\"")) << row;
  EXPECT_NE(std::string::npos, row.find("\"rx_flags\":\"00:00\"")) << row;
  std::string tool = rrpc_stat_path();
  if (access(tool.c_str(), X_OK) == 0) {
    std::string out = run(tool + " " + rdma_test_addr() + ":" + std::to_string(port) + " connections -d");
    EXPECT_NE(std::string::npos, out.find(" cursor ")) << out;
    EXPECT_NE(std::string::npos, out.find("0:" + std::to_string(prod.second) + "/")) << out;
    std::printf("%s\n", out.c_str());
  } else {
    ADD_FAILURE() << tool << " is missing (make tools)";
  }
  rrpc_channel_free(ch);
  rrpc_server_free(srv);
}

}  // namespace
