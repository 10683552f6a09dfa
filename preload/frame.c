/* frame.c - encode and check the relay's frame headers (see frame.h). */
#include "preload/frame.h"

#include <errno.h>
#include <string.h>

static const uint32_t FIN_BIT = 0x80000000u;

int rrpc_run_frame_encode(int fin, uint32_t len, unsigned char out[RRPC_RUN_FRAME_HDR]) {
  if (fin ? len != 0 : (len == 0 || len > RRPC_RUN_FRAME_MAX)) return -EINVAL;
  uint32_t h = fin ? FIN_BIT : len;
  out[0] = (unsigned char)(h >> 24);
  out[1] = (unsigned char)(h >> 16);
  out[2] = (unsigned char)(h >> 8);
  out[3] = (unsigned char)h;
  return 0;
}

int rrpc_run_frame_decode(const unsigned char *in, size_t n, rrpc_run_frame *f) {
  if (n < RRPC_RUN_FRAME_HDR) return -EAGAIN;
  uint32_t h = (uint32_t)in[0] << 24 | (uint32_t)in[1] << 16 | (uint32_t)in[2] << 8 | in[3];
  if (h & FIN_BIT) {
    if (h != FIN_BIT) return -EPROTO;
    f->fin = 1;
    f->len = 0;
    return 0;
  }
  if (h == 0 || h > RRPC_RUN_FRAME_MAX) return -EPROTO;
  f->fin = 0;
  f->len = h;
  return 0;
}

int rrpc_run_hello_match(const unsigned char *in, size_t n) {
  static const unsigned char clc[RRPC_RUN_CLC_EYECATCHER_LEN] = {0xe2, 0xd4, 0xc3, 0xd9};
  size_t k = n < RRPC_RUN_HELLO_LEN ? n : RRPC_RUN_HELLO_LEN;
  if (memcmp(in, RRPC_RUN_HELLO, k) == 0) return k == RRPC_RUN_HELLO_LEN ? 1 : 0;
  size_t e = n < sizeof clc ? n : sizeof clc;
  if (memcmp(in, clc, e) == 0) return e == sizeof clc ? -2 : 0;
  return -1;
}
