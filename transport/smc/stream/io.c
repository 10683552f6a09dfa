// transport/smc/stream/io.c - the byte stream: write (RDMA WRITE + CDC, cursor-paced), read, close, TEST_LINK wait.
#include "transport/smc/stream/stream.h"

#include <errno.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// A consumer-cursor update the kernel's rule asks for and not sent yet goes out now. One that
// found the send queue full stays due (the window is as before): every wait re-checks, so a
// kernel peer blocked on my RMB is never left waiting for an update that could not be posted.
static void send_due_update(struct rrpc_smc_stream *s) {
  if (rrpc__cur_update_due(&s->w)) (void)rrpc__ss_send_cdc(s, 0);
}

int rrpc_smc_stream_write(rrpc_smc_stream *s, const void *buf, size_t len) {
  const uint8_t *p = buf;
  int64_t deadline = rrpc__ss_now_ms() + s->timeout_ms;
  if (s->tx_conn_flags & RRPC_CDC_CS_DONE_WRITING) return -EPIPE;
  while (len > 0) {
    if (!rrpc__ss_link_ok(s) || (s->w.rx_conn_flags & (RRPC_CDC_CS_CLOSED | RRPC_CDC_CS_ABNORMAL)))
      return -ECONNRESET;
    struct rrpc__cur_seg seg[2];
    int nseg = 0;
    uint32_t n = rrpc__cur_tx_plan(&s->w, len, seg, &nseg);
    if (n == 0 || s->sends_out + 3 > SQ_DEPTH) {
      if (n == 0 && !(s->w.tx_flags & RRPC_CDC_PF_WRITE_BLOCKED)) {
        // Tell the peer we wait for room: the kernel then sends its consumer cursor.
        s->w.tx_flags |= RRPC_CDC_PF_WRITE_BLOCKED;
        s->st.write_blocked++;
        if (rrpc__ss_send_cdc(s, 0) != 0) s->w.tx_flags &= (uint8_t)~RRPC_CDC_PF_WRITE_BLOCKED;
      }
      send_due_update(s);
      int left = (int)(deadline - rrpc__ss_now_ms());
      if (left <= 0 || rrpc__ss_progress(s, left) == -ETIMEDOUT) return -ETIMEDOUT;
      continue;
    }
    s->w.tx_flags &= (uint8_t)~RRPC_CDC_PF_WRITE_BLOCKED;
    struct ibv_send_wr wr[2], *bad;
    struct ibv_sge sge[2];
    uint32_t done = 0;
    for (int i = 0; i < nseg; i++) {
      // The staging buffer mirrors the peer's RMB: a byte waits there at the offset it goes
      // to, and that offset is written again only after the peer consumed it.
      memcpy(s->staging + seg[i].off, p + done, seg[i].len);
      sge[i] = (struct ibv_sge){.addr = (uintptr_t)(s->staging + seg[i].off),
                                .length = seg[i].len, .lkey = s->staging_mr->lkey};
      wr[i] = (struct ibv_send_wr){.wr_id = RRPC__SS_WR_WRITE, .sg_list = &sge[i], .num_sge = 1,
                                   .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
                                   .next = i + 1 < nseg ? &wr[i + 1] : NULL};
      wr[i].wr.rdma.remote_addr = s->peer_addr + seg[i].off;
      wr[i].wr.rdma.rkey = s->peer_rkey;
      done += seg[i].len;
    }
    if (ibv_post_send(s->qp, wr, &bad) != 0) return -EIO;
    s->sends_out += (unsigned)nseg;
    rrpc__cur_tx_commit(&s->w, n);
    if (rrpc__ss_send_cdc(s, 0) != 0) return -EIO;
    p += n;
    len -= n;
    s->st.bytes_tx += n;
    deadline = rrpc__ss_now_ms() + s->timeout_ms;
  }
  return 0;
}

long rrpc_smc_stream_read(rrpc_smc_stream *s, void *buf, size_t len) {
  int64_t deadline = rrpc__ss_now_ms() + s->timeout_ms;
  while (s->w.rx_prod == s->w.rx_cons) {
    if (s->w.rx_conn_flags & RRPC_CDC_CS_ABNORMAL) return -ECONNRESET;
    if (s->w.rx_conn_flags & (RRPC_CDC_CS_CLOSED | RRPC_CDC_CS_DONE_WRITING)) return 0;
    if (!rrpc__ss_link_ok(s)) return -ECONNRESET;
    send_due_update(s);
    int left = (int)(deadline - rrpc__ss_now_ms());
    if (left <= 0 || rrpc__ss_progress(s, left) == -ETIMEDOUT) return -ETIMEDOUT;
  }
  uint64_t avail = s->w.rx_prod - s->w.rx_cons;
  uint32_t off = (uint32_t)(s->w.rx_cons % s->w.rx_ring);
  size_t n = len < avail ? len : (size_t)avail;
  if (n > s->w.rx_ring - off) n = s->w.rx_ring - off; // up to the ring's end; the rest next call
  memcpy(buf, s->rmb + off, n);
  rrpc__cur_rx_consume(&s->w, (uint32_t)n);
  s->st.bytes_rx += n;
  send_due_update(s);
  return (long)n;
}

int rrpc_smc_stream_shutdown(rrpc_smc_stream *s) {
  if (s->tx_conn_flags & RRPC_CDC_CS_DONE_WRITING) return 0;
  int64_t deadline = rrpc__ss_now_ms() + s->timeout_ms;
  s->tx_conn_flags |= RRPC_CDC_CS_DONE_WRITING;
  // Every byte written is already posted (write returns once it is), so on the QP this CDC
  // follows the last data CDC, as the kernel's shutdown(SHUT_WR) sends it after its data.
  int rc = -EAGAIN;
  while (rc == -EAGAIN && rrpc__ss_link_ok(s)) {
    rc = rrpc__ss_send_cdc(s, 0);
    if (rc != -EAGAIN) break;
    // The send queue is full: completions free a slot.
    int left = (int)(deadline - rrpc__ss_now_ms());
    if (left <= 0 || rrpc__ss_progress(s, left) == -ETIMEDOUT) rc = -ETIMEDOUT;
  }
  if (rc == -EAGAIN) rc = -ECONNRESET; // the link went down while waiting
  if (rc != 0) s->tx_conn_flags &= (uint8_t)~RRPC_CDC_CS_DONE_WRITING;
  return rc;
}

// Waits, at most until `end`, for cond(s) or the link's loss.
static void wait_until(struct rrpc_smc_stream *s, int (*cond)(const struct rrpc_smc_stream *), int64_t end) {
  while (!cond(s) && rrpc__ss_link_ok(s)) {
    int left = (int)(end - rrpc__ss_now_ms());
    if (left <= 0 || rrpc__ss_progress(s, left) == -ETIMEDOUT) return;
  }
}

static int peer_closed(const struct rrpc_smc_stream *s) {
  return (s->w.rx_conn_flags & (RRPC_CDC_CS_CLOSED | RRPC_CDC_CS_ABNORMAL)) != 0;
}

static int peer_freed_rmb(const struct rrpc_smc_stream *s) {
  return s->st.llc_rx[RRPC_LLC_DELETE_RKEY] > 0;
}

// DELETE_LINK (all links, orderly), then every verbs object freed once the sends left.
void rrpc__ss_end_link(struct rrpc_smc_stream *s) {
  if (rrpc__ss_link_ok(s)) {
    struct rrpc__llc_msg d;
    memset(&d, 0, sizeof d);
    d.type = RRPC_LLC_DELETE_LINK;
    d.version = 2;
    d.flags = RRPC_LLC_FLAG_DEL_LINK_ALL | RRPC_LLC_FLAG_DEL_LINK_ORDERLY;
    d.u.delete_link.link_num = s->link_num;
    d.u.delete_link.reason = RRPC_LLC_DEL_PROG_INIT_TERM;
    (void)rrpc__ss_send_llc(s, &d);
  }
  int64_t end = rrpc__ss_now_ms() + 2000;
  while (s->sends_out > 0 && !s->qp_error && rrpc__ss_now_ms() < end) (void)rrpc__ss_progress(s, (int)(end - rrpc__ss_now_ms()));
  rrpc__ss_destroy(s);
}

// Frees what belongs to the connection, not the link: its RMB and the peer RMB's mirror.
static void end_connection(struct rrpc_smc_stream *s) {
  ibv_dereg_mr(s->rmb_mr);
  ibv_dereg_mr(s->staging_mr);
  free(s->rmb);
  free(s->staging);
  s->rmb_mr = s->staging_mr = NULL;
  s->rmb = s->staging = NULL;
  memset(&s->w, 0, sizeof s->w);
  s->tx_conn_flags = 0;
  uint32_t my_qpn = s->st.my_qpn, kernel_qpn = s->st.kernel_qpn;
  memset(&s->st, 0, sizeof s->st);
  s->st.my_qpn = my_qpn;
  s->st.kernel_qpn = kernel_qpn;
}

int rrpc_smc_stream_close(rrpc_smc_stream *s, struct rrpc_smc_stream_stats *final, int keep_link) {
  int rc = 0;
  // The kernel's order for an orderly close: my CDC with "closed" (cursors current), then
  // the peer's own.
  if (rrpc__ss_link_ok(s) && rrpc__ss_send_cdc(s, RRPC_CDC_CS_CLOSED) != 0) rc = -EIO;
  if (rc == 0) wait_until(s, peer_closed, rrpc__ss_now_ms() + s->timeout_ms);
  if (rc == 0 && !peer_closed(s)) rc = rrpc__ss_link_ok(s) ? -ETIMEDOUT : -ECONNRESET;
  // The kernel frees the connection after its socket release and then deletes its RMB's rkey
  // (DELETE_RKEY), expecting the answer within 2 s or it takes the link down: wait for it
  // (bounded). Only then may the link go: a link deleted while the kernel's close still runs
  // can deadlock 6.1's socket release (seen: a kernel client stuck for good in
  // __smc_release's lock_sock).
  wait_until(s, peer_freed_rmb, rrpc__ss_now_ms() + 3000);
  if (final != NULL) *final = s->st;
  if (keep_link && s->is_server && rrpc__ss_link_ok(s)) {
    end_connection(s);
    if (rrpc__ss_parked != NULL) rrpc__ss_end_link(rrpc__ss_parked);
    rrpc__ss_parked = s;
    return rc;
  }
  rrpc__ss_end_link(s);
  return rc;
}

void rrpc_smc_stream_end_parked(void) {
  if (rrpc__ss_parked != NULL) rrpc__ss_end_link(rrpc__ss_parked);
  rrpc__ss_parked = NULL;
}

static int test_links_seen(const struct rrpc_smc_stream *s) {
  return s->st.llc_rx[RRPC_LLC_TEST_LINK] >= s->test_links_wanted;
}

unsigned rrpc_smc_stream_await_test_link(rrpc_smc_stream *s, unsigned count, int max_ms) {
  s->test_links_wanted = count;
  wait_until(s, test_links_seen, rrpc__ss_now_ms() + max_ms);
  return s->st.llc_rx[RRPC_LLC_TEST_LINK];
}

const struct rrpc_smc_stream_stats *rrpc_smc_stream_counters(const rrpc_smc_stream *s) { return &s->st; }

