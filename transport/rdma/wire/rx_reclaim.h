/* wire/rx_reclaim.h - private to the RDMA transport: tracks which parts of
 * the receive ring the application has released, so the consumer cursor
 * moves only over a contiguous released prefix.
 *
 * Received bytes go up as iobuf blocks that reference the ring (zero copy);
 * they may be released in any order. Each release is a range [start, end) of
 * stream offsets (total bytes since the start, never wrapped). Ranges beyond
 * the cursor are kept merged in a small sorted array, so their number never
 * exceeds the number of blocks outstanding; the array grows on demand.
 *
 * Thread safety: none; one tracker per endpoint, calls serialized by it.
 * Never blocks. */
#ifndef RRPC_TRANSPORT_RDMA_WIRE_RX_RECLAIM_H
#define RRPC_TRANSPORT_RDMA_WIRE_RX_RECLAIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rrpc__rx_range {
  uint64_t start;
  uint64_t end; /* exclusive */
};

struct rrpc__rx_reclaim {
  uint64_t cons; /* everything below it is released */
  struct rrpc__rx_range *ranges; /* owned; sorted, disjoint, not touching
                                    each other or cons */
  uint32_t n;
  uint32_t cap;
  uint32_t max_ranges; /* growth limit, 0 = none; see _init */
};

/* rrpc__rx_reclaim_init - start tracking at stream offset start. max_ranges
 * bounds the array (the endpoint passes the most blocks it hands out at
 * once; going beyond is then a bug reported as -ENOMEM); 0 = no bound but
 * memory. Does not allocate; cannot fail. */
void rrpc__rx_reclaim_init(struct rrpc__rx_reclaim *r, uint64_t start,
                           uint32_t max_ranges);

/* rrpc__rx_reclaim_destroy - frees the array. r may be reused after _init. */
void rrpc__rx_reclaim_destroy(struct rrpc__rx_reclaim *r);

/* rrpc__rx_reclaim_release - [start, end) was released. Sets *advance to how
 * far cons moved (0 if a gap remains before start). Returns 0; -EINVAL for an
 * empty range, one below cons or overlapping a range already released (a
 * double release), with r unchanged; -ENOMEM if the array could not grow
 * (r unchanged). */
int rrpc__rx_reclaim_release(struct rrpc__rx_reclaim *r, uint64_t start,
                             uint64_t end, uint64_t *advance);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_WIRE_RX_RECLAIM_H */
