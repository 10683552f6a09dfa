/* transport/rdma/slots.h - private to the RDMA transport: connections'
 * CDC receive slots, carved from a slab registered once per protection
 * domain instead of one MR (and one pinned page, at least) per connection.
 *
 * Slots are local memory only (LOCAL_WRITE, no remote access): a peer
 * reaches a slot only through a receive its own QP consumed, so sharing
 * one MR's lkey between connections isolates nothing less than an MR
 * each did. An area is cleared when it is handed out again.
 *
 * The slab grows by chunks of RRPC__SLOT_CHUNK (or one area, if larger),
 * each registered on the setup thread that asks for it and counted in
 * slot_bytes and the registered cap; chunks are kept until the process
 * exits (bounded by the most connections open at once), areas go back to a
 * free list per size.
 *
 * Thread safety: any thread (setup and teardown run on background verbs
 * threads); never called on a loop. */
#ifndef RRPC_TRANSPORT_RDMA_SLOTS_H
#define RRPC_TRANSPORT_RDMA_SLOTS_H

#include <infiniband/verbs.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { RRPC__SLOT_CHUNK = 64 * 1024 };

/* rrpc__slots_get - a cleared area of `len` bytes (a multiple of 64) on
 * `pd`, and the MR that covers it (shared: never deregister it). 0,
 * -ENOMEM, -RRPC_EPOOL (the registered cap), -RRPC_ERDMAMEM or -errno of
 * the registration (EMFILE, ENOMEM from ulimit -l). */
int rrpc__slots_get(struct ibv_pd *pd, size_t len, char **mem, struct ibv_mr **mr);

/* rrpc__slots_put - give an area back (its receives flushed: the QP that
 * used it is destroyed). `mr` is what rrpc__slots_get gave. */
void rrpc__slots_put(char *mem, size_t len, struct ibv_mr *mr);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_SLOTS_H */
