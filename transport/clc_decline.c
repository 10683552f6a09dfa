/* clc_decline.c - sends SMC-R CLC messages on a TCP fd (clc_decline.h). */
#include "transport/clc_decline.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "rrpc/errors.h"
#include "rrpc/transport.h"
#include "transport/rdma/wire/clc.h"

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

const char *rrpc__transport_fallback_text(uint32_t decline_code) {
  return rrpc__clc_decline_text(decline_code);
}
