/* clc_sniff.c - lets a TCP-only server meet clients that ask for RDMA: an
 * SMC-R CLC Proposal as the first bytes of a connection is consumed and
 * answered with a CLC Decline ("no SMC device"), after which both sides
 * speak plain TCP on the same connection, as SMC-R's fallback prescribes.
 *
 * The first bytes are read into the socket's read buffer like any others
 * (a peek would leave them in the kernel, and a level-triggered loop would
 * wake for them again at once, for ever) and looked at there; whatever is
 * not a CLC message is delivered to the protocol untouched. While the bytes
 * so far could still be the start of a CLC message, a deadline runs
 * (rrpc_limits.clc_sniff_timeout_ms): a peer that stops there is closed.
 * Bytes that are not CLC go through brpc_sniff.c next (a brpc client's
 * RDMA hello), under the same deadline. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "rrpc/errors.h"
#include "rrpc/internal/limits.h"
#include "rrpc/internal/log.h"
#include "transport/clc_decline.h"
#include "transport/smc/clc.h"
#include "transport/tcp/tcp_internal.h"

struct rrpc__tcp_sniff {
  rrpc__socket *s;
  rrpc__timer_id timer; /* 0 = no deadline armed; the timer holds a socket ref */
  int brpc;             /* not CLC: looking for a brpc RDMA hello (brpc_sniff.c) */
  int brpc_waiting_ack; /* brpc hello refused, its ACK awaited */
  int offers_rdma;      /* a use_rdma server's socket: its fallbacks count */
};

int rrpc__tcp_sniff_begin(rrpc__socket *s, int offers_rdma) {
  struct rrpc__tcp_sniff *st = calloc(1, sizeof *st);
  if (st == NULL) return -ENOMEM;
  st->s = s;
  st->offers_rdma = offers_rdma;
  rrpc__socket_set_tstate(s, st);
  return 0;
}

void rrpc__tcp_sniff_note_fallback(rrpc__socket *s, uint32_t code) {
  const struct rrpc__tcp_sniff *st = rrpc__socket_tstate(s);
  if (st != NULL && st->offers_rdma) rrpc__rdma_note_fallback(code);
  rrpc__socket_note_fallback(s, code);
}

void rrpc__tcp_sniff_end(rrpc__socket *s) {
  struct rrpc__tcp_sniff *st = rrpc__socket_tstate(s);
  if (st == NULL) return;
  rrpc__socket_set_tstate(s, NULL);
  /* Loop thread, as the timer: cancel either removes it or it already ran
   * (and then cleared st->timer itself). */
  if (st->timer != 0 && rrpc__loop_timer_cancel(rrpc__socket_loop(s), st->timer) == 0)
    rrpc__socket_unref(s);
  free(st);
}

static void sniff_deadline(void *arg) {
  struct rrpc__tcp_sniff *st = arg;
  rrpc__socket *s = st->s;
  st->timer = 0;
  rrpc__limit_count(RRPC__LC_CLC_SNIFF_TIMEOUTS);
  char peer[64];
  rrpc__socket_peer_str(s, peer, sizeof peer);
  RRPC_LOG(WARNING, "closing connection from %s: its first bytes looked like an RDMA handshake "
           "(SMC-R CLC or brpc's) and it did not complete within %d ms", peer, rrpc__limit_sniff_timeout_ms());
  rrpc__socket_fail(s, -ETIMEDOUT);
  rrpc__socket_unref(s);
}

static int arm_deadline(struct rrpc__tcp_sniff *st) {
  if (st->timer != 0) return 0;
  uint64_t deadline = rrpc__now_us() + (uint64_t)rrpc__limit_sniff_timeout_ms() * 1000u;
  rrpc__socket_ref(st->s);
  int rc = rrpc__loop_timer_add(rrpc__socket_loop(st->s), deadline, sniff_deadline, st, &st->timer);
  if (rc != 0) {
    st->timer = 0;
    rrpc__socket_unref(st->s);
  }
  return rc;
}

int rrpc__tcp_sniff_classify(const uint8_t *buf, size_t n, size_t *clc_len, int *is_decline) {
  struct rrpc__clc_hdr h;
  int rc = rrpc__clc_peek_header(buf, n, &h);
  if (rc == -EAGAIN || (rc == 0 && n < h.length)) return RRPC_SNIFF_WAIT;
  if (rc != 0) return RRPC_SNIFF_PLAIN;
  *clc_len = h.length;
  *is_decline = h.type == RRPC_CLC_DECLINE;
  return RRPC_SNIFF_CLC;
}

/* Not CLC: a brpc RDMA hello, or plain bytes. Shares the deadline. */
static int sniff_brpc(struct rrpc__tcp_sniff *st) {
  st->brpc = 1;
  int rc = rrpc__tcp_brpc_sniff_check(st->s, &st->brpc_waiting_ack);
  return rc == 0 ? arm_deadline(st) : rc;
}

int rrpc__tcp_sniff_check(rrpc__socket *s) {
  struct rrpc__tcp_sniff *st = rrpc__socket_tstate(s);
  if (st->brpc) return sniff_brpc(st);
  rrpc_iobuf *rbuf = rrpc__socket_rbuf(s);
  uint8_t buf[RRPC_CLC_MAX_LEN];
  size_t n = rrpc_iobuf_copy_out(rbuf, 0, buf, sizeof buf), len = 0;
  int is_decline = 0;
  switch (rrpc__tcp_sniff_classify(buf, n, &len, &is_decline)) {
    case RRPC_SNIFF_WAIT:
      return arm_deadline(st); /* 0: wait */
    case RRPC_SNIFF_PLAIN:
      return sniff_brpc(st);
    default:
      break;
  }
  rrpc_iobuf_pop_front(rbuf, len);
  if (is_decline) {
    /* The client gave up on RDMA itself; /connections shows its reason. */
    struct rrpc__clc_decline d;
    uint32_t code = rrpc__clc_decode_decline(buf, len, &d) == 0 ? d.diag : 0;
    rrpc__tcp_sniff_note_fallback(s, code);
    return 1;
  }
  RRPC_LOG(INFO, "declining an SMC-R %s: this server does not offer RDMA", rrpc__clc_type_name(buf[4]));
  rrpc__tcp_sniff_note_fallback(s, RRPC_CLC_DECL_NOSMCDEV);
  int rc = rrpc__clc_send_decline(rrpc__socket_fd(s), RRPC_CLC_DECL_NOSMCDEV);
  return rc < 0 ? rc : 1;
}
