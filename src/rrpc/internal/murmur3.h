/* internal/murmur3.h - private to the rrpc core: MurmurHash3 (x86, 32-bit),
 * used by the c_murmurhash balancer. */
#ifndef RRPC_INTERNAL_MURMUR3_H
#define RRPC_INTERNAL_MURMUR3_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* rrpc__murmur3_32 - the hash of data[0..len) with `seed`. Pure. */
uint32_t rrpc__murmur3_32(const void *data, size_t len, uint32_t seed);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_INTERNAL_MURMUR3_H */
