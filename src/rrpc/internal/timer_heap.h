/* internal/timer_heap.h - private to loop.c: the per-loop timer set, a binary
 * min-heap on (deadline, id) plus an id -> node hash so cancel is O(log n).
 *
 * Thread-safety: none. The owning loop serialises every call with its mutex.
 * Ownership: the heap owns its nodes and arrays; fn/arg are borrowed and
 * handed back, uncalled, by rrpc__timer_heap_pop_due.
 */
#ifndef RRPC_INTERNAL_TIMER_HEAP_H
#define RRPC_INTERNAL_TIMER_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "rrpc/internal/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rrpc__timer_node rrpc__timer_node;

typedef struct rrpc__timer_heap {
  rrpc__timer_node **heap; /* owned; heap[0] has the smallest (deadline, id) */
  size_t len, cap;
  /* Open-addressed id -> node table, linear probing, key 0 = empty slot.
   * Capacity is a power of two and kept at most half full. */
  rrpc__timer_node **slots; /* owned */
  size_t slot_mask;         /* capacity - 1, or 0 before the first insert */
  rrpc__timer_node *free_nodes; /* owned; recycled nodes, singly linked */
  size_t free_count;
  rrpc__timer_id next_id; /* starts at 1; 0 is never a valid id */
} rrpc__timer_heap;

/* rrpc__timer_heap_init - an empty heap; allocates nothing. */
void rrpc__timer_heap_init(rrpc__timer_heap *h);

/* rrpc__timer_heap_destroy - free everything; pending timers are dropped
 * without running. */
void rrpc__timer_heap_destroy(rrpc__timer_heap *h);

/* rrpc__timer_heap_add - insert a timer; the new id (strictly greater than
 * every id handed out before by this heap) goes to *out. 0 or -ENOMEM
 * (then nothing changed). */
int rrpc__timer_heap_add(rrpc__timer_heap *h, uint64_t deadline_us, rrpc__task_fn fn, void *arg,
                         rrpc__timer_id *out);

/* rrpc__timer_heap_cancel - remove a pending timer. 0, or -ENOENT if `id`
 * is not pending (never existed, already popped or cancelled). */
int rrpc__timer_heap_cancel(rrpc__timer_heap *h, rrpc__timer_id id);

/* rrpc__timer_heap_next_deadline - the earliest deadline, or UINT64_MAX
 * when the heap is empty. */
uint64_t rrpc__timer_heap_next_deadline(const rrpc__timer_heap *h);

/* rrpc__timer_heap_pop_due - if the earliest timer has deadline <= now_us
 * and an id below `id_limit`, remove it, hand its fn/arg out and return 0;
 * otherwise -EAGAIN. `id_limit` lets the loop skip timers created by the
 * callbacks it is running right now, so a callback that re-arms itself in
 * the past cannot starve fd events. */
int rrpc__timer_heap_pop_due(rrpc__timer_heap *h, uint64_t now_us, rrpc__timer_id id_limit,
                             rrpc__task_fn *fn, void **arg);

/* rrpc__timer_heap_size - number of pending timers. */
size_t rrpc__timer_heap_size(const rrpc__timer_heap *h);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_INTERNAL_TIMER_HEAP_H */
