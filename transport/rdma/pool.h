/* transport/rdma/pool.h - private to the RDMA transport: memory registered
 * with the device. The registered pool is the iobuf block allocator while
 * RDMA is on, so message blocks go to the wire without a copy; user memory
 * registered through rrpc_rdma_register_memory uses the same region type.
 *
 * A block's `region` cookie is a rrpc__rdma_region*, so its lkey is one
 * load away. Regions from other allocators (or none) are told apart by the
 * magic and must be copied into pool memory before sending. */
#ifndef RRPC_TRANSPORT_RDMA_POOL_H
#define RRPC_TRANSPORT_RDMA_POOL_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#include "rrpc/internal/iobuf.h"
#include "transport/rdma/device.h"

/* C++ (the RDMA tests) includes this header too. */
#ifdef __cplusplus
extern "C" {
#endif

#define RRPC_RDMA_REGION_MAGIC 0x52524d52u /* "RRMR" */

typedef struct rrpc__rdma_region {
  uint32_t magic;
  uint32_t lkey;
  struct ibv_mr *mr;
  char *base;
  size_t len;
} rrpc__rdma_region;

/* rrpc__rdma_region_of - the region of a block cookie if it is ours and
 * covers [p, p+len), else NULL. O(1). */
static inline const rrpc__rdma_region *rrpc__rdma_region_of(const void *cookie, const void *p,
                                                             size_t len) {
  const rrpc__rdma_region *r = (const rrpc__rdma_region *)cookie;
  if (r == NULL || r->magic != RRPC_RDMA_REGION_MAGIC) return NULL;
  const char *c = (const char *)p;
  if (c < r->base || c + len > r->base + r->len) return NULL;
  return r;
}

/* rrpc__rdma_block_region - the RDMA region holding [p, p+len) of block b,
 * or NULL. Only cookies that are ours are read: pool blocks, and blocks
 * without an allocator (user memory, ring slices) whose cookie carries our
 * magic. A block of another allocator has that allocator's opaque cookie,
 * which is never dereferenced. */
const rrpc__rdma_region *rrpc__rdma_block_region(const rrpc_block *b, const void *p, size_t len);

/* rrpc__rdma_pool_start - register the first pool region on `d` and make the
 * pool the block allocator (rrpc_block_allocator_set). Idempotent (a later
 * call, with any d, returns 0 and changes nothing). Sizes from the options
 * (initial, increase, cap). `d` is borrowed until exit: pass the
 * process-wide device (rrpc__rdma_dev_get). Size classes, growth and why
 * regions are never given back: pool.c. 0, -RRPC_ERDMAMEM, -ENOMEM, or
 * -EBUSY when the application installed its own block allocator (the pool
 * would have to replace it: RDMA stays off instead, logged once). */
int rrpc__rdma_pool_start(rrpc__rdma_dev *d);

/* rrpc__rdma_pool_alloc - a registered area of >= size bytes (the same path
 * the block allocator uses), e.g. for bounce copies. Registered with
 * LOCAL_WRITE only: not for memory a peer writes into (a receive ring
 * needs its own MR with REMOTE_WRITE). *region gets the area's
 * rrpc__rdma_region. 0, -RRPC_EPOOL when the cap is reached,
 * -RRPC_ERDMAMEM when registration fails, -RRPC_ENOTREADY before
 * rrpc__rdma_pool_start, -ENOMEM. Any thread; never blocks on other
 * callers except while the pool grows (mmap + ibv_reg_mr). */
int rrpc__rdma_pool_alloc(size_t size, void **data, size_t *cap, void **region);
/* rrpc__rdma_pool_free - give back an area with the cap and region alloc
 * returned. Any thread. */
void rrpc__rdma_pool_free(void *data, size_t cap, void *region);

/* rrpc__rdma_pool_bytes - registered bytes now (for stats). */
size_t rrpc__rdma_pool_bytes(void);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_POOL_H */
