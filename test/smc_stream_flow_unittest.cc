// smc_stream_flow_unittest.cc - the flow control of rrpc/smc_stream.h (transport/smc/stream/io.c)
// against a scripted kernel peer, on the host. The link underneath is replaced at link time
// (-Wl,--wrap of rrpc__ss_send_cdc and rrpc__ss_progress, Makefile and BUILD): a CDC "sent" is
// handed to the peer model, a "wait" lets the peer act. The peer follows Linux 6.1's rules
// (net/smc: smc_cdc_msg_recv_action, smc_cdc_cursor_to_host, smc_tx_consumer_update, its
// write_blocked in the CDC of the data that filled the ring), kept with the kernel's own
// {wrap, count} cursor arithmetic so that rrpc's 64-bit offsets are checked against it.
// Without RDMA the stream is not built and the tests skip.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#ifdef RRPC_WITH_RDMA
#include <infiniband/verbs.h>

extern "C" {
#include "rrpc/smc_stream.h"
#include "transport/smc/stream/stream.h"
}

namespace {

constexpr uint32_t kToken = 0x52525043;      // rrpc's alert token (the kernel's CDCs carry it)
constexpr uint32_t kPeerToken = 0x00000f01;  // the kernel's
constexpr uint32_t kRing = 64 << 10;         // both RMBs, as in the suite
constexpr uint32_t kUpdateLimit = 2304;      // the kernel's rmbe_update_limit for 64 KiB

// The kernel's host cursor and its arithmetic (smc_curs_add / smc_curs_diff / _large).
struct KCursor {
  uint16_t wrap = 0;
  uint32_t count = 0;
};
int CursDiff(uint32_t size, KCursor o, KCursor n) {
  int64_t d = o.wrap != n.wrap ? (int64_t)size - o.count + n.count : (int64_t)n.count - o.count;
  return d > 0 ? (int)d : 0;
}
int64_t CursDiffLarge(uint32_t size, KCursor o, KCursor n) {
  if (o.wrap < n.wrap) return (int64_t)size - o.count + n.count + (int64_t)(n.wrap - o.wrap - 1) * size;
  if (o.wrap > n.wrap) return -((int64_t)size - n.count + o.count + (int64_t)(o.wrap - n.wrap - 1) * size);
  return (int64_t)n.count - o.count;
}
void CursAdd(uint32_t size, KCursor *c, uint32_t v) {
  c->count += v;
  if (c->count >= size) {
    c->wrap++;
    c->count -= size;
  }
}
// smc_cdc_cursor_to_host: an older cursor does not replace the newer one.
void ToHost(KCursor *local, const rrpc__cdc_cursor &peer) {
  if (local->wrap > peer.wrap && peer.wrap) return;
  if (local->wrap == peer.wrap && local->count > peer.count) return;
  local->wrap = peer.wrap;
  local->count = peer.count;
}
uint8_t Pattern(uint64_t off) { return (uint8_t)(off * 7 + (off >> 11)); }

// A kernel AF_SMC socket whose application reads everything it can, as smc_pingpong does.
struct KernelPeer {
  std::vector<uint8_t> rmb = std::vector<uint8_t>(kRing);  // rrpc RDMA-WRITEs here
  KCursor rx_prod, rx_cons_of_peer, cons, confirmed;         // local_rx_ctrl, my consumer cursor
  uint8_t rx_prod_flags = 0, rx_conn_flags = 0;
  uint16_t rx_seq = 0, tx_seq = 0;
  int bytes_to_rcv = 0;
  uint64_t app_read = 0;   // bytes the application read, each checked against Pattern
  bool data_ok = true;
  KCursor tx_prod;         // how far I wrote into rrpc's RMB
  std::vector<rrpc__cdc_msg> out;  // my CDCs not yet delivered to rrpc

  // smc_cdc_rx_handler + smc_cdc_msg_recv_action for one CDC of rrpc.
  void Receive(const rrpc__cdc_msg &m) {
    if ((int16_t)(uint16_t)(m.seq - rx_seq) < 0) return; // "received seqno is old"
    rx_seq = m.seq;
    KCursor old = rx_prod;
    ToHost(&rx_prod, m.prod);
    ToHost(&rx_cons_of_peer, m.cons);
    rx_prod_flags = m.prod_flags;
    rx_conn_flags = m.conn_flags;
    bytes_to_rcv += CursDiff(kRing, old, rx_prod);
  }
  // The application reads all there is; then smc_tx_consumer_update's rule.
  void AppRead() {
    for (int i = 0; i < bytes_to_rcv; i++, app_read++)
      if (rmb[(cons.count + i) % kRing] != Pattern(app_read)) data_ok = false;
    CursAdd(kRing, &cons, (uint32_t)bytes_to_rcv);
    bytes_to_rcv = 0;
    int to_confirm = CursDiff(kRing, confirmed, cons);
    int64_t sender_free = kRing;
    if (to_confirm > (int)kUpdateLimit) sender_free = kRing - CursDiffLarge(kRing, confirmed, rx_prod);
    bool blocked = rx_prod_flags & RRPC_CDC_PF_WRITE_BLOCKED;
    if (to_confirm > (int)kUpdateLimit && (sender_free <= kRing / 2 || blocked)) Send(0, 0);
    if (blocked && bytes_to_rcv == 0) rx_prod_flags &= (uint8_t)~RRPC_CDC_PF_WRITE_BLOCKED;
  }
  void Send(uint8_t prod_flags, uint8_t conn_flags) {
    rrpc__cdc_msg m{};
    m.seq = ++tx_seq;
    m.token = kToken;
    m.prod = {tx_prod.wrap, tx_prod.count};
    m.cons = {cons.wrap, cons.count};
    m.prod_flags = prod_flags;
    m.conn_flags = conn_flags;
    confirmed = cons;
    out.push_back(m);
  }
};

// The test's link: what the wrapped functions act on.
struct FakeLink {
  KernelPeer peer;
  std::vector<rrpc__cdc_msg> sent;  // every CDC rrpc posted, in order
  size_t arrived = 0;               // how many of them the peer has processed
  bool queue_full = false;     // post_msg's -EAGAIN: the send queue has no slot
  std::function<int(rrpc_smc_stream *)> on_wait;  // a wait: the peer acts; -ETIMEDOUT if nothing
};
FakeLink *g_link;

// Hands the kernel's pending CDCs to the stream, as link.c's receive path does.
void DeliverToStream(rrpc_smc_stream *s) {
  for (const rrpc__cdc_msg &m : g_link->peer.out) {
    rrpc__cur_event ev;
    rrpc__cur_violation why;
    ASSERT_EQ(0, rrpc__cur_on_cdc(&s->w, &m, &ev, &why)) << rrpc__cur_violation_text(why);
    s->st.cdc_rx++;
  }
  g_link->peer.out.clear();
}

int FakePostSend(ibv_qp *, ibv_send_wr *wr, ibv_send_wr **) {
  for (; wr != nullptr; wr = wr->next) {
    EXPECT_EQ(IBV_WR_RDMA_WRITE, wr->opcode);
    EXPECT_LE(wr->wr.rdma.remote_addr + wr->sg_list[0].length, kRing); // peer_addr is 0
    memcpy(&g_link->peer.rmb[wr->wr.rdma.remote_addr], (void *)wr->sg_list[0].addr, wr->sg_list[0].length);
  }
  return 0;
}

}  // namespace

extern "C" {
// link.c's rrpc__ss_send_cdc without the QP: the same window bookkeeping (a CDC not posted
// leaves the window as it was), the CDC to the peer model.
int __wrap_rrpc__ss_send_cdc(rrpc_smc_stream *s, uint8_t conn_flags) {
  if (g_link->queue_full || s->sends_out >= SQ_DEPTH) return -EAGAIN;
  rrpc__cdc_msg m;
  rrpc__cur_make_cdc(&s->w, s->peer_token, (uint8_t)(conn_flags | s->tx_conn_flags), &m);
  s->sends_out++;
  s->st.cdc_tx++;
  g_link->sent.push_back(m);
  return 0;
}
int __wrap_rrpc__ss_progress(rrpc_smc_stream *s, int wait_ms) {
  (void)wait_ms;
  return g_link->on_wait(s);
}
}

namespace {

class SmcStreamFlow : public ::testing::Test {
 protected:
  void SetUp() override {
    g_link = &link_;
    ctx_.ops.post_send = FakePostSend;
    qp_.context = &ctx_;
    s_ = static_cast<rrpc_smc_stream *>(calloc(1, sizeof *s_));
    s_->qp = &qp_;
    s_->staging = static_cast<uint8_t *>(calloc(1, kRing));
    s_->staging_mr = &staging_mr_;
    s_->rmb = static_cast<uint8_t *>(calloc(1, kRing));
    s_->peer_token = kPeerToken;
    s_->token = kToken;
    s_->timeout_ms = 1000;
    ASSERT_EQ(0, rrpc__cur_init(&s_->w, kRing, kRing, kToken));
  }
  void TearDown() override {
    free(s_->staging);
    free(s_->rmb);
    free(s_);
    g_link = nullptr;
  }
  // rrpc's CDCs sent so far reach the kernel, in order; with read_each its application reads
  // after each one (so its consumer update may go out before rrpc's next CDC is processed),
  // else once after all. Its CDCs go to rrpc. True if it sent any.
  bool PeerActs(rrpc_smc_stream *s, bool read_each) {
    bool sent_any = false;
    while (link_.arrived < link_.sent.size()) {
      link_.peer.Receive(link_.sent[link_.arrived++]);
      if (read_each || link_.arrived == link_.sent.size()) link_.peer.AppRead();
      sent_any = sent_any || !link_.peer.out.empty();
      DeliverToStream(s);
    }
    return sent_any;
  }
  void SixteenMiB(bool read_each) {
    const size_t total = 16u << 20;
    std::vector<uint8_t> data(total);
    for (size_t i = 0; i < total; i++) data[i] = Pattern(i);
    link_.on_wait = [&](rrpc_smc_stream *s) {
      s->sends_out = 0;  // every send completed
      return PeerActs(s, read_each) ? 0 : -ETIMEDOUT;
    };
    ASSERT_EQ(0, rrpc_smc_stream_write(s_, data.data(), total));
    (void)PeerActs(s_, read_each);  // the last CDCs
    EXPECT_TRUE(link_.peer.data_ok);
    EXPECT_EQ(total, link_.peer.app_read);
    EXPECT_EQ(256u, link_.peer.cons.wrap);
    EXPECT_EQ(0u, link_.peer.cons.count);
    EXPECT_EQ(255u, s_->st.write_blocked);  // every full ring but the last one
  }
  // The kernel writes n bytes into rrpc's RMB (pattern from `from`) and sends its CDC, with
  // write_blocked when they filled the ring (smc_tx_rdma_writes: to_send >= rmbespace).
  void KernelWrites(uint64_t from, uint32_t n, bool fills_ring) {
    for (uint32_t i = 0; i < n; i++) s_->rmb[(from + i) % kRing] = Pattern(from + i);
    CursAdd(kRing, &link_.peer.tx_prod, n);
    link_.peer.Send(fills_ring ? RRPC_CDC_PF_WRITE_BLOCKED : 0, 0);
  }

  FakeLink link_;
  ibv_context ctx_{};
  ibv_qp qp_{};
  ibv_mr staging_mr_{};
  rrpc_smc_stream *s_ = nullptr;
};

// The kernel filled rrpc's RMB and waits (write_blocked) for the consumer cursor. rrpc's read
// takes the 64 KiB while its send queue is full (completions of a write burst not yet reaped),
// so the due update cannot be posted then. The next read must send it once the queue has
// room: the kernel writes nothing more before it, and a read that only waits times out.
TEST_F(SmcStreamFlow, ReadSendsADeferredConsumerUpdateOnceTheSendQueueHasRoom) {
  KernelWrites(0, kRing, true);
  DeliverToStream(s_);
  std::vector<uint8_t> buf(kRing);
  link_.queue_full = true;
  ASSERT_EQ((long)kRing, rrpc_smc_stream_read(s_, buf.data(), buf.size()));
  EXPECT_TRUE(link_.sent.empty()) << "nothing could be posted";

  int waits = 0;
  link_.on_wait = [&](rrpc_smc_stream *s) {
    if (waits++ == 0) {  // the send completions: the queue has room again
      link_.queue_full = false;
      return 0;
    }
    // The kernel goes on only once it has seen the whole ring consumed.
    while (link_.arrived < link_.sent.size()) link_.peer.Receive(link_.sent[link_.arrived++]);
    if (CursDiffLarge(kRing, {0, 0}, link_.peer.rx_cons_of_peer) < (int64_t)kRing || waits > 3)
      return -ETIMEDOUT;
    KernelWrites(kRing, 4096, false);
    DeliverToStream(s);
    return 0;
  };
  ASSERT_EQ(4096, rrpc_smc_stream_read(s_, buf.data(), buf.size()))
      << "the consumer update was never sent: " << link_.sent.size() << " CDCs";
  ASSERT_EQ(1u, link_.sent.size());
  EXPECT_EQ(1u, link_.sent[0].cons.wrap);
  EXPECT_EQ(0u, link_.sent[0].cons.count);
  for (uint32_t i = 0; i < 4096; i++) ASSERT_EQ(Pattern(kRing + i), buf[i]) << i;
}

// 16 MiB through the kernel's 64 KiB RMB: 256 wraps of its cursors. Every byte lands where
// the kernel's {wrap, count} cursors say, in order, and rrpc blocks exactly when the ring is
// full - whether the kernel's consumer update goes out before or after it processed rrpc's
// separate write-blocked CDC.
TEST_F(SmcStreamFlow, SixteenMiBThroughA64KiBRingKernelReadsAfterEachCdc) { SixteenMiB(true); }
TEST_F(SmcStreamFlow, SixteenMiBThroughA64KiBRingKernelReadsAfterAll) { SixteenMiB(false); }

// shutdown: one CDC with "done writing" carrying the cursors of everything written; later
// writes are refused; reads go on, and every later CDC (consumer updates, the close) keeps
// the flag, as the kernel's conn_state_flags stay set.
TEST_F(SmcStreamFlow, ShutdownSendsDoneWritingAndReadsGoOn) {
  link_.on_wait = [&](rrpc_smc_stream *s) {
    s->sends_out = 0;
    return -ETIMEDOUT;
  };
  std::vector<uint8_t> msg(100);
  for (size_t i = 0; i < msg.size(); i++) msg[i] = Pattern(i);
  ASSERT_EQ(0, rrpc_smc_stream_write(s_, msg.data(), msg.size()));
  ASSERT_EQ(0, rrpc_smc_stream_shutdown(s_));
  ASSERT_EQ(2u, link_.sent.size());
  const rrpc__cdc_msg &done = link_.sent[1];
  EXPECT_EQ(RRPC_CDC_CS_DONE_WRITING, done.conn_flags);
  EXPECT_EQ(0u, done.prod.wrap);
  EXPECT_EQ(100u, done.prod.count);
  EXPECT_EQ(0, rrpc_smc_stream_shutdown(s_)) << "a second shutdown is a no-op";
  EXPECT_EQ(2u, link_.sent.size());
  EXPECT_EQ(-EPIPE, rrpc_smc_stream_write(s_, msg.data(), msg.size()));

  // The kernel read EOF after the 100 bytes and answers with a full ring.
  EXPECT_FALSE(PeerActs(s_, true));
  EXPECT_TRUE(link_.peer.rx_conn_flags & RRPC_CDC_CS_DONE_WRITING);
  EXPECT_EQ(100u, link_.peer.app_read);
  KernelWrites(0, kRing, true);
  DeliverToStream(s_);
  std::vector<uint8_t> buf(kRing);
  ASSERT_EQ((long)kRing, rrpc_smc_stream_read(s_, buf.data(), buf.size()));
  ASSERT_EQ(3u, link_.sent.size()) << "the consumer update for the blocked kernel";
  EXPECT_EQ(RRPC_CDC_CS_DONE_WRITING, link_.sent[2].conn_flags);
  EXPECT_EQ(1u, link_.sent[2].cons.wrap);
}

}  // namespace

#else

TEST(SmcStreamFlow, NeedsRdma) { GTEST_SKIP() << "rrpc/smc_stream.h is built with RDMA only"; }

#endif
