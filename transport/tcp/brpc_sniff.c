/* brpc_sniff.c - lets a server that does not serve brpc's RDMA dialect meet
 * brpc clients that ask for it: a brpc RDMA hello ("RDMA" v2 or "RDM3" v3,
 * transport/rdma/wire/brpc_hello.h) as the first bytes of a connection is
 * consumed and answered with brpc's own "won't do RDMA" hello in the same
 * form; the client then sends a 4-byte ACK with bit 0 clear and speaks
 * baidu_std over this TCP connection, which is served as usual - never
 * closed. Bytes of the first request that arrive in the same read as the
 * ACK are kept (brpc's own server drops such a connection).
 *
 * Hard errors close the connection as brpc's client and server do: a
 * length out of range, a v3 body that is not a RdmaHello, and an ACK that
 * claims RDMA after the refusal. The caller (clc_sniff.c) runs the
 * deadline while bytes are awaited. */
#include <errno.h>
#include <stdint.h>

#include "rrpc/errors.h"
#include "rrpc/internal/limits.h"
#include "rrpc/internal/log.h"
#include "transport/clc_decline.h"
#include "transport/fallback_codes.h"
#include "transport/rdma/wire/brpc_hello.h"
#include "transport/tcp/tcp_internal.h"

static int hard_error(rrpc__socket *s, const char *what) {
  char peer[64];
  rrpc__socket_peer_str(s, peer, sizeof peer);
  rrpc__limit_count(RRPC__LC_BRPC_HELLO_ERRORS);
  RRPC_LOG(WARNING, "closing connection from %s: brpc RDMA handshake: %s", peer, what);
  return -RRPC_EPARSE;
}

/* A whole hello is at the front of the read buffer: consume it and refuse. */
static int refuse(rrpc__socket *s, const uint8_t *buf, size_t len) {
  struct rrpc__brpc_hello h, r;
  if (rrpc__brpc_hello_decode(buf, len, &h) != 0) return hard_error(s, "malformed RDM3 hello");
  rrpc_iobuf_pop_front(rrpc__socket_rbuf(s), len);
  uint32_t reason = rrpc__brpc_hello_valid(&h) ? RRPC_FB_BRPC_NOT_SERVED : RRPC_FB_BRPC_INVALID_HELLO;
  rrpc__tcp_sniff_note_fallback(s, reason);
  rrpc__brpc_hello_refusal(h.version, 1, &r);
  uint8_t out[RRPC_BRPC_HELLO_MAX];
  size_t n = 0;
  int rc = rrpc__brpc_hello_encode(&r, out, sizeof out, &n);
  if (rc == 0) rc = rrpc__clc_send_all(rrpc__socket_fd(s), out, n);
  return rc;
}

static int read_ack(rrpc__socket *s) {
  rrpc_iobuf *rbuf = rrpc__socket_rbuf(s);
  uint8_t ack[RRPC_BRPC_ACK_LEN];
  if (rrpc_iobuf_copy_out(rbuf, 0, ack, sizeof ack) < sizeof ack) return 0;
  if (rrpc__brpc_ack_decode(ack) & RRPC_BRPC_ACK_RDMA) return hard_error(s, "ACK asks for RDMA after a refusal");
  rrpc_iobuf_pop_front(rbuf, sizeof ack);
  return 1;
}

int rrpc__tcp_brpc_sniff_check(rrpc__socket *s, int *waiting_ack) {
  if (*waiting_ack) return read_ack(s);
  uint8_t buf[RRPC_BRPC_HELLO_MAX];
  size_t n = rrpc_iobuf_copy_out(rrpc__socket_rbuf(s), 0, buf, sizeof buf), len = 0;
  int c = rrpc__brpc_hello_frame(buf, n, &len);
  if (c == RRPC_BRPC_NOT) return 1;
  if (c == RRPC_BRPC_WAIT) return 0;
  if (c < 0) return hard_error(s, "hello length out of range");
  int rc = refuse(s, buf, len);
  if (rc != 0) return rc;
  *waiting_ack = 1;
  return read_ack(s);
}
