/* transport/rdma/imm/pieces_mem.h - private to the RDMA transport: the memory
 * of elastic-ring pieces (docs/elastic-rings.md section 1) and the
 * process-wide cache of cleared, registered pieces that grants take from.
 *
 * A piece is its own MR (LOCAL_WRITE | MW_BIND, no remote access of its
 * own) plus, once granted, a type-2 memory window over all of it, allocated
 * and bound to the connection's QP at the grant (never cached: a window
 * older than its QP makes rxe's QP teardown at exit hang): one MR per
 * piece because rxe does not enforce a window's bounds
 * (shared/specs/rxe-memory-windows.md), so the worst a peer can reach
 * through a window is that piece. Without type-2 windows on the device the
 * MR itself is remotely writable (as the ring was).
 *
 * Registration, clearing and deregistration run on the background verbs
 * setup thread only: a loop takes a ready piece (no verbs call) or is told
 * to wait; the cache refills below its low-water mark, and wakes waiters
 * when it did. Every cached or used piece holds its bytes of the
 * process-wide registered cap (budget.c) and counts in ring_bytes.
 *
 * Thread safety: every function may be called from any thread. */
#ifndef RRPC_TRANSPORT_RDMA_PIECES_MEM_H
#define RRPC_TRANSPORT_RDMA_PIECES_MEM_H

#include <infiniband/verbs.h>
#include <stdint.h>

#include "rrpc/internal/loop.h"
#include "transport/rdma/device.h"
#include "transport/rdma/pool.h"
#include "transport/rdma/verbs_bg.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rrpc__piece {
  struct rrpc__bg_job job; /* recycling: first, a job finds its piece */
  struct rrpc__piece *next; /* in its cache class */
  rrpc__rdma_dev *dev;
  char *buf;
  uint32_t len;
  struct ibv_mr *mr;
  struct ibv_mw *mw;   /* none in the cache; allocated and bound to one QP at the grant */
  uint32_t rkey;       /* what the peer writes with (the window's once bound) */
  rrpc__rdma_region region; /* slices of it are sent on zero-copy */
};

/* rrpc__piece_take - a cleared, registered piece of len bytes (4 KiB << n)
 * from the cache, or -EAGAIN when that class is empty (a refill is under
 * way: rrpc__piece_wait is told when it is done). Never blocks, never calls
 * verbs. */
int rrpc__piece_take(rrpc__rdma_dev *dev, uint32_t len, struct rrpc__piece **out);

/* rrpc__piece_wait - call fn(arg) on loop `loop` (rrpc__loop_post) after
 * the next refill finished; `undo(arg)` instead if it cannot be posted. At
 * most RRPC__PIECE_WAITERS wait at once: -EBUSY then (the caller retries on
 * its next poll). */
enum { RRPC__PIECE_WAITERS = 1024 };
int rrpc__piece_wait(rrpc__loop *loop, void (*fn)(void *), void (*undo)(void *), void *arg);

/* rrpc__piece_bind - allocate p's window and bind it to qp with a fresh
 * rkey (an IBV_WR_BIND_MW posted with wr_id, signaled): from then on only
 * the peer at the other end of qp can write p. 0, -RRPC_ERDMAMEM (no
 * window) or the post's negative code (no window left then). A device
 * without type-2 windows: nothing is posted (returns 1). Call it after qp
 * exists, on the thread that owns qp's send queue. */
int rrpc__piece_bind(struct rrpc__piece *p, struct ibv_qp *qp, uint64_t wr_id);

/* rrpc__piece_unbind - deallocate p's window now (never invalidated: a
 * second invalidation crashes rxe 6.1), so nothing written through its rkey
 * can land any more, and no window holds the QP. Idempotent. */
void rrpc__piece_unbind(struct rrpc__piece *p);

/* rrpc__piece_put - p is no longer used (its window unbound): cleared for
 * the cache, or deregistered when the cache is full, on the background
 * thread. */
void rrpc__piece_put(struct rrpc__piece *p);

/* rrpc__pieces_prefill - start filling the cache (first elastic use).
 * cache_bytes: what the cache may keep (--rdma_piece_cache_size_mb). */
void rrpc__pieces_prefill(rrpc__rdma_dev *dev, uint64_t cache_bytes);

/* Process-wide, for rrpc_rdma_get_stats and tests. */
struct rrpc__pieces_stats {
  uint64_t cached_bytes; /* cleared, registered, waiting in the cache */
  uint64_t used_bytes;   /* taken by connections (granted, full or held) */
  uint64_t misses;       /* takes that found their class empty */
  uint64_t refills;      /* pieces registered by refills */
};
void rrpc__pieces_stats(struct rrpc__pieces_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_PIECES_MEM_H */
