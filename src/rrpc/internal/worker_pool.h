/* internal/worker_pool.h - private to the rrpc core: a fixed pool of threads
 * running tasks in FIFO order, for server handlers that may block. */
#ifndef RRPC_INTERNAL_WORKER_POOL_H
#define RRPC_INTERNAL_WORKER_POOL_H

#include <stdint.h>

#include "rrpc/internal/loop.h"

typedef struct rrpc__worker_pool rrpc__worker_pool;

/* start - `nthreads` threads; at most `max_queue` (> 0) tasks wait for one.
 * 0, -ENOMEM or -errno from pthread_create (then nothing is left running). */
int rrpc__worker_pool_start(int nthreads, int max_queue, const char *name, rrpc__worker_pool **out);
/* submit - run fn(arg) on a pool thread, never inside the call. 0, -ENOMEM,
 * -RRPC_EOVERCROWDED (max_queue tasks already wait; counted),
 * -ESHUTDOWN (stopping). fn does not run on an error. Any thread. */
int rrpc__worker_pool_submit(rrpc__worker_pool *p, rrpc__task_fn fn, void *arg);
/* rejected - submits refused with -RRPC_EOVERCROWDED so far. Any thread. */
uint64_t rrpc__worker_pool_rejected(const rrpc__worker_pool *p);
/* stop - run what is queued, join the threads, free. Not from a pool thread. */
void rrpc__worker_pool_stop(rrpc__worker_pool *p);

#endif /* RRPC_INTERNAL_WORKER_POOL_H */
