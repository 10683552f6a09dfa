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
#include "transport/clc_decline.h"
#include "transport/rdma/wire/clc.h"
#include "transport/tcp/tcp_internal.h"

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
  if (h.type == RRPC_CLC_DECLINE) {
    struct rrpc__clc_decline d;
    rrpc__socket_note_fallback(s, rrpc__clc_decode_decline(buf, h.length, &d) == 0 ? d.diag : 0);
    return 1; /* the client gave up on RDMA itself */
  }
  RRPC_LOG(INFO, "declining an SMC-R %s: this server does not offer RDMA", rrpc__clc_type_name(h.type));
  rrpc__socket_note_fallback(s, RRPC_CLC_DECL_NOSMCDEV);
  rc = rrpc__clc_send_decline(fd, RRPC_CLC_DECL_NOSMCDEV);
  return rc < 0 ? rc : 1;
}
