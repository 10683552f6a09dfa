/* murmur3.c - MurmurHash3, x86 32-bit variant (public-domain algorithm by
 * Austin Appleby), for the c_murmurhash balancer. Pure. */
#include <stdint.h>
#include <string.h>

#include "rrpc/internal/murmur3.h"

static uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

static uint32_t mix_k(uint32_t k) {
  k *= 0xcc9e2d51u;
  k = rotl32(k, 15);
  return k * 0x1b873593u;
}

uint32_t rrpc__murmur3_32(const void *data, size_t len, uint32_t seed) {
  const uint8_t *p = data;
  uint32_t h = seed;
  size_t nblocks = len / 4;
  for (size_t i = 0; i < nblocks; i++) {
    uint32_t k = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                 (uint32_t)p[4 * i + 3] << 24;
    h ^= mix_k(k);
    h = rotl32(h, 13);
    h = h * 5 + 0xe6546b64u;
  }
  const uint8_t *tail = p + nblocks * 4;
  uint32_t k = 0;
  switch (len & 3) {
    case 3:
      k ^= (uint32_t)tail[2] << 16;
      /* fall through */
    case 2:
      k ^= (uint32_t)tail[1] << 8;
      /* fall through */
    case 1:
      k ^= tail[0];
      h ^= mix_k(k);
      break;
    default:
      break;
  }
  h ^= (uint32_t)len;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}
