// cursor_rogue_rdma_test.cc - hostile peers against an rrpc server in the
// cursor dialect (SMC-R's WRITE + CDC cursors, transport/rdma/wire/
// cursor_window.h), on real verbs (Soft-RoCE in the VM). The peer is
// rogue_peer.h's (test code with its own device context) offering only the
// cursor dialect, then writing into the server's ring and sending CDCs made
// with rrpc's own codec: a producer cursor past what it could have written,
// a wrong wrap, a consumer cursor past what the server wrote, a CDC carrying
// another connection's token, data after its own close, never a consumer-
// cursor update (the server's answers fill its ring). Each case: the
// server closes that connection (protocol_violations counted, the reason
// logged), answers nothing it should not have read, and keeps serving
// others. Every wait is bounded (5 s), every loop bounded in count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>

#include "rrpc/rrpc.h"
#include "test/common/test_util.h"
#include "test/rdma/rdma_test_util.h"
#include "test/rdma/rogue_peer.h"
#include "test/rdma/tsan_suppressions.h"

using rrpc_test::rdma_test_addr;

namespace {

const int kCloseMs = 5000;
const int kStallMs = 1500;  // --rdma_cursor_stall_ms of this binary (default 60 s)

using rrpc_rdma_test::log_mark;
using rrpc_rdma_test::logged_since;

void init_rdma() {
  static bool done = false;
  if (done) return;
  done = true;
  rrpc_log_set_sink(rrpc_rdma_test::log_capture_sink, nullptr);
  rrpc_rdma_options o;
  rrpc_rdma_options_init(&o);
  o.ring_size = 64 * 1024;
  o.cursor_stall_ms = kStallMs;
  ASSERT_EQ(rrpc_rdma_global_init(&o), 0);
}

struct Server : rrpc_rdma_test::EchoServer {
  Server() : EchoServer(init_rdma) {}
};

bool others_served(int port) {
  rrpc_channel *ch = rrpc_rdma_test::open_channel(port, 1);
  if (!ch) return false;
  int rdma = 0;
  bool ok = rrpc_rdma_test::echo(ch, "still-serving", "", nullptr, &rdma) == 0 && rdma;
  rrpc_channel_free(ch);
  return ok;
}

uint64_t violations() {
  rrpc_rdma_stats st;
  rrpc_rdma_get_stats(&st);
  return st.protocol_violations;
}

// rogue::Peer as a cursor-dialect client: it writes requests into the
// server's ring and tells them by CDC; the server's answers land in its
// own ring, told by the server's CDCs.
struct Cursor : rogue::Peer {
  uint32_t server_ring = 0;
  uint16_t seq = 0;
  uint64_t cons = 0;             // what we consumed of the server's writes (told in our CDCs)
  uint64_t server_prod = 0;      // the server's producer cursor, from its CDCs
  std::string answers;           // every byte the server wrote, in order

  Cursor() { features = RRPC_CLC_FEAT_CURSOR; }

  bool up(const std::string &ip, int port) {
    if (!propose(ip, port) || !read_accept()) return false;
    if (accept.rrpc_features & RRPC_CLC_FEAT_WWI) return fail("the server chose imm");
    server_ring = (uint32_t)rrpc__clc_ring_size(accept.ring_code);
    if (!create_verbs() || !connect_qp() || !send_confirm()) return false;
    return poll_cdc(5000);  // the server's first CDC
  }

  // A plain RDMA WRITE of data at offset off of the server's ring.
  int write_at(uint32_t off, const std::string &data) {
    memcpy(buf, data.data(), data.size());
    uint64_t id = post_buf(IBV_WR_RDMA_WRITE, (uint32_t)data.size(), 0, accept.ring_addr + off, accept.rkey);
    return id == 0 ? -1 : wait_send(id);
  }

  // A CDC with these cursors (offsets) and flags, the next sequence number.
  int send_cdc(uint64_t prod, uint32_t token, uint8_t conn_flags = 0, int wrap_delta = 0) {
    rrpc__cdc_msg m = {};
    m.seq = ++seq;
    m.token = token;
    m.prod = rrpc__cdc_cursor_from_offset(prod, server_ring);
    m.prod.wrap = (uint16_t)(m.prod.wrap + wrap_delta);
    m.cons = rrpc__cdc_cursor_from_offset(cons, ring_size);
    m.conn_flags = conn_flags;
    uint8_t b[RRPC_CDC_LEN];
    rrpc__cdc_encode(&m, b);
    return send_op(std::string((const char *)b, sizeof b), false, 0);
  }

  int wait_send(uint64_t id) {
    ibv_wc wc;
    uint64_t end = rogue::now_ms() + 5000;
    while (rogue::now_ms() < end) {
      if (!poll_one(&wc, (int)(end - rogue::now_ms()))) return -2;
      if (wc.wr_id == id && !(wc.opcode & IBV_WC_RECV)) return wc.status;
      if (wc.status != IBV_WC_SUCCESS) return wc.status;
      if (wc.opcode & IBV_WC_RECV) on_cdc(wc);
    }
    return -2;
  }

  // A received CDC: the bytes it says the server wrote join `answers`.
  void on_cdc(const ibv_wc &wc) {
    rrpc__cdc_msg m;
    const uint8_t *slot = (const uint8_t *)buf + kStage + wc.wr_id * kSlot;
    if (rrpc__cdc_decode(slot, wc.byte_len, &m) == 0) {
      uint64_t p;
      if (rrpc__cdc_cursor_to_offset(&m.prod, ring_size, server_prod, &p) == 0 && p >= server_prod) {
        for (uint64_t o = server_prod; o < p; o++) answers += ring[o % ring_size];
        server_prod = p;
      }
    }
    post_recv(wc.wr_id);
  }

  bool poll_cdc(int ms) {
    ibv_wc wc;
    if (!poll_one(&wc, ms)) return false;
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV) return fail("not a CDC");
    on_cdc(wc);
    return true;
  }

  // Poll CDCs until pred() or ms passed.
  template <class F>
  void poll_for(int ms, F pred) {
    uint64_t end = rogue::now_ms() + (uint64_t)ms;
    while (!pred() && rogue::now_ms() < end) {
      ibv_wc wc;
      int n = ibv_poll_cq(cq, 1, &wc);
      if (n < 0 || (n == 1 && wc.status != IBV_WC_SUCCESS)) return;
      if (n == 1 && wc.opcode == IBV_WC_RECV) on_cdc(wc);
      if (n == 0) usleep(500);  // a busy loop on a 2-core machine would starve the server
    }
  }

  // An honest request: written at our producer cursor, then its CDC.
  uint64_t prod = 0;
  int echo(const std::string &req, int64_t cid) {
    std::string f = echo_frame(req, cid);
    int st = write_at((uint32_t)(prod % server_ring), f);
    if (st != IBV_WC_SUCCESS) return st;
    prod += f.size();
    return send_cdc(prod, accept.token);
  }
};

#define CURSOR_UP(r, port) ASSERT_TRUE((r).up(rdma_test_addr(), (port))) << (r).error

// The server must close the rogue's connection within kCloseMs, count a
// violation, log `why` and go on serving others.
void expect_fails_only_the_rogue(const char *what, const char *why, Server &srv, Cursor &r, size_t mark,
                                 uint64_t v0, uint64_t t0) {
  bool closed = rogue::tcp_closed_within(r.fd, kCloseMs);
  uint64_t ms = rogue::now_ms() - t0, dv = violations() - v0;
  bool served = others_served(srv.port);
  printf("CURSOR-ROGUE %s: closed by the server: %s after %llu ms, violations +%llu, others served: %s\n", what,
         closed ? "yes" : "NO", (unsigned long long)ms, (unsigned long long)dv, served ? "yes" : "NO");
  EXPECT_TRUE(closed) << what;
  EXPECT_GE(dv, 1u) << what;
  EXPECT_TRUE(served) << what;
  EXPECT_TRUE(logged_since(mark, why)) << what << ": no log line saying \"" << why << "\"";
}

TEST(CursorRogue, HonestCursorPeerGetsItsEcho) {
  // The rogue's honest path works, so the cases below fail for their
  // forgery alone.
  Server srv;
  ASSERT_GT(srv.port, 0);
  Cursor r;
  CURSOR_UP(r, srv.port);
  ASSERT_EQ(r.echo("hello-cursor", 1), IBV_WC_SUCCESS);
  r.poll_for(kCloseMs, [&] { return r.answers.find("hello-cursor") != std::string::npos; });
  EXPECT_NE(r.answers.find("hello-cursor"), std::string::npos);
  EXPECT_FALSE(rogue::tcp_closed_within(r.fd, 200));
}

TEST(CursorRogue, ProducerCursorPastWhatItCouldHaveWrittenFailsOnlyTheRogue) {
  Server srv;
  ASSERT_GT(srv.port, 0);
  Cursor r;
  CURSOR_UP(r, srv.port);
  size_t mark = log_mark();
  uint64_t v0 = violations(), t0 = rogue::now_ms();
  // A whole ring plus one byte claimed at once: more than any free room.
  EXPECT_EQ(r.send_cdc(r.server_ring + 1ull, r.accept.token), IBV_WC_SUCCESS);
  expect_fails_only_the_rogue("producer-past-ring", "producer cursor past", srv, r, mark, v0, t0);
  EXPECT_EQ(r.answers, "") << "the server answered bytes it should never have read";
}

TEST(CursorRogue, WrongWrapFailsOnlyTheRogue) {
  Server srv;
  ASSERT_GT(srv.port, 0);
  Cursor r;
  CURSOR_UP(r, srv.port);
  // One honest echo first, so the wrong wrap comes mid-stream.
  ASSERT_EQ(r.echo("before-the-wrap", 1), IBV_WC_SUCCESS);
  r.poll_for(kCloseMs, [&] { return r.answers.find("before-the-wrap") != std::string::npos; });
  ASSERT_NE(r.answers.find("before-the-wrap"), std::string::npos);
  size_t before = r.answers.size();
  std::string f = rogue::Peer::echo_frame("after-a-wrong-wrap", 2);
  ASSERT_EQ(r.write_at((uint32_t)(r.prod % r.server_ring), f), IBV_WC_SUCCESS);
  size_t mark = log_mark();
  uint64_t v0 = violations(), t0 = rogue::now_ms();
  // The right count, one wrap ahead: a ring's worth the peer never wrote.
  EXPECT_EQ(r.send_cdc(r.prod + f.size(), r.accept.token, 0, 1), IBV_WC_SUCCESS);
  expect_fails_only_the_rogue("wrong-wrap", "producer cursor past", srv, r, mark, v0, t0);
  EXPECT_EQ(r.answers.find("after-a-wrong-wrap", before), std::string::npos);
}

TEST(CursorRogue, ConsumerCursorPastWhatTheServerWroteFailsOnlyTheRogue) {
  Server srv;
  ASSERT_GT(srv.port, 0);
  Cursor r;
  CURSOR_UP(r, srv.port);
  size_t mark = log_mark();
  uint64_t v0 = violations(), t0 = rogue::now_ms();
  r.cons = 1000;  // the server wrote nothing yet
  EXPECT_EQ(r.send_cdc(0, r.accept.token), IBV_WC_SUCCESS);
  expect_fails_only_the_rogue("consumer-past-written", "consumer cursor past", srv, r, mark, v0, t0);
}

TEST(CursorRogue, CdcWithAnotherConnectionsTokenFailsOnlyTheRogue) {
  Server srv;
  ASSERT_GT(srv.port, 0);
  Cursor victim, attacker;
  CURSOR_UP(victim, srv.port);
  CURSOR_UP(attacker, srv.port);
  // The attacker writes a request into its own ring slot of the server and
  // tells it with the victim's token: the server must not take it as the
  // victim's (or anyone's) data.
  std::string f = rogue::Peer::echo_frame("foreign-token", 7);
  ASSERT_EQ(attacker.write_at(0, f), IBV_WC_SUCCESS);
  size_t mark = log_mark();
  uint64_t v0 = violations(), t0 = rogue::now_ms();
  EXPECT_EQ(attacker.send_cdc(f.size(), victim.accept.token), IBV_WC_SUCCESS);
  expect_fails_only_the_rogue("foreign-token", "another connection (token)", srv, attacker, mark, v0, t0);
  EXPECT_EQ(attacker.answers.find("foreign-token"), std::string::npos);
  // The victim's own connection is untouched and still answered.
  ASSERT_EQ(victim.echo("victim-intact", 1), IBV_WC_SUCCESS);
  victim.poll_for(kCloseMs, [&] { return victim.answers.find("victim-intact") != std::string::npos; });
  EXPECT_NE(victim.answers.find("victim-intact"), std::string::npos);
  EXPECT_EQ(victim.answers.find("foreign-token"), std::string::npos);
}

TEST(CursorRogue, DataAfterItsOwnCloseIsNeverRead) {
  Server srv;
  ASSERT_GT(srv.port, 0);
  Cursor r;
  CURSOR_UP(r, srv.port);
  std::string f = rogue::Peer::echo_frame("after-close", 3);
  ASSERT_EQ(r.write_at(0, f), IBV_WC_SUCCESS);
  uint64_t t0 = rogue::now_ms();
  // "Done writing" first, then a CDC that claims the bytes written before
  // it: the server closes on the first and never reads the second's data.
  EXPECT_EQ(r.send_cdc(0, r.accept.token, RRPC_CDC_CS_DONE_WRITING), IBV_WC_SUCCESS);
  (void)r.send_cdc(f.size(), r.accept.token);
  bool closed = rogue::tcp_closed_within(r.fd, kCloseMs);
  printf("CURSOR-ROGUE data-after-close: closed by the server: %s after %llu ms, others served: %s\n",
         closed ? "yes" : "NO", (unsigned long long)(rogue::now_ms() - t0), others_served(srv.port) ? "yes" : "NO");
  EXPECT_TRUE(closed);
  EXPECT_EQ(r.answers.find("after-close"), std::string::npos);
}

TEST(CursorRogue, NeverUpdatingTheConsumerCursorFailsOnlyTheRogueWithinTheDeadline) {
  Server srv;
  ASSERT_GT(srv.port, 0);
  Cursor r;
  r.ring_size = 16 * 1024;  // the server's answers fill it after two requests
  CURSOR_UP(r, srv.port);
  rrpc_rdma_stats st0;
  rrpc_rdma_get_stats(&st0);
  // Three 9 KB echoes (27 KB: well within the server's 64 KiB ring); the
  // answers need 27 KB of our 16 KiB ring and we never tell the server we
  // read any of it.
  for (int i = 0; i < 3; i++) ASSERT_EQ(r.echo(std::string(9000, (char)('a' + i)), i + 1), IBV_WC_SUCCESS);
  uint64_t t0 = rogue::now_ms();
  bool closed = rogue::tcp_closed_within(r.fd, kStallMs + 5000);
  uint64_t ms = rogue::now_ms() - t0;
  rrpc_rdma_stats st1;
  rrpc_rdma_get_stats(&st1);
  bool served = others_served(srv.port);
  printf("CURSOR-ROGUE never-updates-consumer-cursor: closed by the server: %s after %llu ms "
         "(--rdma_cursor_stall_ms=%d), cursor_stalls +%llu, others served: %s\n",
         closed ? "yes" : "NO", (unsigned long long)ms, kStallMs,
         (unsigned long long)(st1.cursor_stalls - st0.cursor_stalls), served ? "yes" : "NO");
  EXPECT_TRUE(closed);
  EXPECT_GE(ms + 500, (uint64_t)kStallMs) << "closed before the deadline: for another reason?";
  EXPECT_EQ(1u, st1.cursor_stalls - st0.cursor_stalls);
  EXPECT_TRUE(served);
}

}  // namespace
