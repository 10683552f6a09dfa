/* transport/smc/bytes.h - private to the SMC wire codecs: big-endian loads and stores
 * on byte arrays. Callers bounds-check first; these never read past n bytes. */
#ifndef RRPC_TRANSPORT_SMC_BYTES_H
#define RRPC_TRANSPORT_SMC_BYTES_H

#include <stdint.h>

static inline uint16_t rrpc__be16(const uint8_t *p) {
  return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t rrpc__be24(const uint8_t *p) {
  return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static inline uint32_t rrpc__be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
}

static inline uint64_t rrpc__be64(const uint8_t *p) {
  return (uint64_t)rrpc__be32(p) << 32 | rrpc__be32(p + 4);
}

static inline void rrpc__put_be16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

static inline void rrpc__put_be24(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 16);
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)v;
}

static inline void rrpc__put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

static inline void rrpc__put_be64(uint8_t *p, uint64_t v) {
  rrpc__put_be32(p, (uint32_t)(v >> 32));
  rrpc__put_be32(p + 4, (uint32_t)v);
}

#endif /* RRPC_TRANSPORT_SMC_BYTES_H */
