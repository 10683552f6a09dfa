/* internal/lock.h - private to rrpc: a mutex of one futex word, for the
 * locks taken on every call (a connection's pending map, a socket's write
 * queue, a loop's task queue and timers).
 *
 * Why not pthread_mutex_t: an uncontended glibc lock and unlock cost about
 * 55 instructions a pair (the mutex's type, owner and count are looked at
 * on both sides), and a call took four such pairs on the client and two on
 * the server. Here the pair is one compare-and-swap and one exchange,
 * inline; only a contended lock leaves the inline path (the futex wait and
 * wake, lock.c). The same guarantees as a normal (non-recursive, no
 * error-checking) mutex: acquire on lock, release on unlock, waiters sleep
 * in the kernel and never spin. It cannot be used with a condition
 * variable; the locks that need one stay pthread mutexes.
 *
 * The word: 0 free, 1 held, 2 held and someone may be waiting (Drepper,
 * "Futexes Are Tricky", mutex3).
 */
#ifndef RRPC_INTERNAL_LOCK_H
#define RRPC_INTERNAL_LOCK_H

#include <stdatomic.h>

typedef struct rrpc__lock {
  atomic_int word;
} rrpc__lock;

/* The contended halves (lock.c): sleep until the lock is ours; wake one
 * sleeper. */
void rrpc__lock_wait(rrpc__lock *l);
void rrpc__lock_wake(rrpc__lock *l);

/* An unlocked lock. Nothing to destroy. */
static inline void rrpc__lock_init(rrpc__lock *l) { atomic_init(&l->word, 0); }

/* Blocks until held. Not recursive: the holder must not lock it again. */
static inline void rrpc__lock_acquire(rrpc__lock *l) {
  int free_word = 0;
  if (!atomic_compare_exchange_strong_explicit(&l->word, &free_word, 1, memory_order_acquire,
                                               memory_order_relaxed))
    rrpc__lock_wait(l);
}

/* By the holder only. Wakes one sleeper if there may be one. */
static inline void rrpc__lock_release(rrpc__lock *l) {
  if (atomic_exchange_explicit(&l->word, 0, memory_order_release) == 2) rrpc__lock_wake(l);
}

#endif /* RRPC_INTERNAL_LOCK_H */
