/* clc_sniff.c - lets a TCP-only server meet clients that ask for RDMA: an
 * SMC-R CLC Proposal as the first bytes of a connection is consumed and
 * answered with a CLC Decline ("no SMC device"), after which both sides
 * speak plain TCP on the same connection, as SMC-R's fallback prescribes.
 * Only the first bytes are looked at, with MSG_PEEK, so a plain client's
 * data is never consumed here. */
#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>

#include "rrpc/errors.h"
#include "rrpc/internal/log.h"
#include "transport/rdma/wire/clc.h"
#include "transport/tcp/tcp_internal.h"

static int send_decline(int fd) {
  struct rrpc__clc_decline d = {0};
  d.diag = RRPC_CLC_DECL_NOSMCDEV;
  uint8_t buf[RRPC_CLC_DECLINE_V1_LEN];
  size_t len;
  int rc = rrpc__clc_encode_decline(&d, buf, sizeof buf, &len);
  if (rc != 0) return rc;
  ssize_t w = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  /* 28 bytes into a fresh connection's empty send buffer: a short write
   * here means the connection is already broken. */
  return w == (ssize_t)len ? 0 : (w < 0 ? -errno : -RRPC_ECLOSE);
}

int rrpc__tcp_sniff_clc(rrpc__socket *s) {
  int fd = rrpc__socket_fd(s);
  uint8_t buf[RRPC_CLC_MAX_LEN];
  ssize_t n = recv(fd, buf, RRPC_CLC_HDR_LEN, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : 1;
  if (n == 0) return 1; /* EOF: the normal read path reports it */
  struct rrpc__clc_hdr h;
  int rc = rrpc__clc_peek_header(buf, (size_t)n, &h);
  if (rc == -EAGAIN) return 0;
  if (rc != 0) return 1; /* not CLC: a plain client */
  n = recv(fd, buf, h.length, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -errno;
  if ((size_t)n < h.length) return 0;
  if (recv(fd, buf, h.length, MSG_DONTWAIT) != (ssize_t)h.length) return -RRPC_ECLOSE;
  if (h.type == RRPC_CLC_DECLINE) return 1; /* the client gave up on RDMA itself */
  RRPC_LOG(INFO, "declining an SMC-R %s: this server does not offer RDMA", rrpc__clc_type_name(h.type));
  rc = send_decline(fd);
  return rc < 0 ? rc : 1;
}
