/* copy_short.h - copies of at most 16 bytes without a memcpy call.
 *
 * For the encoders' small fields and payloads the call and its size
 * dispatch cost more than the copy. Fixed-size memcpys compile to single
 * loads and stores; the second of each pair overlaps the first when n is
 * not a multiple of the word, so every size class is two moves. */
#ifndef RRPC_INTERNAL_COPY_SHORT_H
#define RRPC_INTERNAL_COPY_SHORT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* n (0 - 16) bytes from src to dst; the ranges do not overlap. */
static inline void rrpc__copy_le16(uint8_t *dst, const void *src_v, size_t n) {
  const uint8_t *src = src_v;
  uint64_t a, b;
  uint32_t x, y;
  if (n >= 8) {
    memcpy(&a, src, 8);
    memcpy(&b, src + n - 8, 8);
    memcpy(dst, &a, 8);
    memcpy(dst + n - 8, &b, 8);
  } else if (n >= 4) {
    memcpy(&x, src, 4);
    memcpy(&y, src + n - 4, 4);
    memcpy(dst, &x, 4);
    memcpy(dst + n - 4, &y, 4);
  } else {
    for (size_t i = 0; i < n; i++)
      dst[i] = src[i];
  }
}

#endif /* RRPC_INTERNAL_COPY_SHORT_H */
