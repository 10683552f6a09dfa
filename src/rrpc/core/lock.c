/* lock.c - the contended halves of rrpc__lock (internal/lock.h): sleeping
 * on the lock's futex word and waking a sleeper. The uncontended lock and
 * unlock are inline in the header and never get here. */
#include "rrpc/internal/lock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Mark the lock contended (2) and sleep while someone else holds it; the
 * exchange that finds it free (0) takes it, still marked 2, so that our
 * unlock wakes whoever may have queued behind us (a spare wake-up at
 * worst). */
void rrpc__lock_wait(rrpc__lock *l) {
  while (atomic_exchange_explicit(&l->word, 2, memory_order_acquire) != 0)
    syscall(SYS_futex, (int *)&l->word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void rrpc__lock_wake(rrpc__lock *l) {
  syscall(SYS_futex, (int *)&l->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
