/* clc_decline.c - sends SMC-R CLC messages on a TCP fd (clc_decline.h). */
#include "transport/clc_decline.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "rrpc/errors.h"
#include "rrpc/transport.h"
#include "transport/fallback_codes.h"
#include "transport/smc/clc.h"

int rrpc__clc_send_all(int fd, const uint8_t *buf, size_t len) {
  ssize_t w = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (w == (ssize_t)len) return 0;
  return w < 0 ? -errno : -RRPC_ECLOSE;
}

int rrpc__clc_send_decline(int fd, uint32_t code) {
  struct rrpc__clc_decline d;
  memset(&d, 0, sizeof d);
  d.diag = code;
  uint8_t buf[RRPC_CLC_DECLINE_V1_LEN];
  size_t len;
  int rc = rrpc__clc_encode_decline(&d, buf, sizeof buf, &len);
  return rc != 0 ? rc : rrpc__clc_send_all(fd, buf, len);
}

const char *rrpc__fallback_code_text(uint32_t code) {
  switch (code) {
  case RRPC_FB_BRPC_NOT_SERVED: return "brpc RDMA hello refused: brpc's RDMA dialect is not served here";
  case RRPC_FB_BRPC_INVALID_HELLO: return "brpc RDMA hello not valid (version or sizes)";
  case RRPC_FB_PEER_CLOSED_HANDSHAKE: return "server closed the connection during the RDMA handshake";
  case RRPC_FB_PEER_TCP_ONLY: return "server remembered as TCP-only";
  default: return NULL;
  }
}

const char *rrpc__transport_fallback_text(uint32_t decline_code) {
  const char *t = rrpc__fallback_code_text(decline_code);
  return t != NULL ? t : rrpc__clc_decline_text(decline_code);
}
