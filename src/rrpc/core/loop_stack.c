/* loop_stack.c - where a long loop callback was: the watchdog's stack sampler.
 *
 * The watchdog (loop.c) learns that a callback was slow only when it ends,
 * when its stack is gone. So while the watchdog is on, a sampler thread
 * looks at every loop thread's running callback every few milliseconds;
 * one that has run past half the watchdog's bound (wall time) gets a
 * signal, and its handler records the thread's stack then - inside the
 * lock wait, the syscall or the loop that takes the time. The watchdog
 * prints that stack with its report. Tests and debugging only: nothing
 * here runs unless the watchdog is on.
 *
 * The signal carries the callback's sequence number (pthread_sigqueue), so
 * a signal that arrives after its callback ended records nothing. The
 * handler calls backtrace(), which is not async-signal-safe on its first
 * call (it loads the unwinder); the sampler makes that first call itself
 * before it sends any signal. */
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rrpc/internal/loop.h"

#define STACK_DEPTH 32

struct slot {
  pthread_t thread;
  atomic_uint_least64_t start_us; /* of the running callback; 0: none */
  atomic_int seq;                 /* numbers the callbacks */
  atomic_int sent;                /* seq a signal was sent for */
  atomic_int taken;               /* seq the stack below belongs to */
  void *stack[STACK_DEPTH];
  int depth;
  struct slot *next; /* g_slots, under g_mu */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct slot *g_slots;
static atomic_uint_least64_t g_after_us; /* sample callbacks older than this; 0: off */
static int g_started;                    /* under g_mu */
static atomic_uint_least64_t g_taken; /* stacks recorded, for tests */
static _Thread_local struct slot tls_slot;
static _Thread_local int tls_registered;

static int stack_signal(void) { return SIGRTMIN + 5; }

static void on_signal(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  struct slot *s = &tls_slot;
  int seq = si->si_value.sival_int;
  if (!tls_registered || atomic_load(&s->seq) != seq || atomic_load(&s->start_us) == 0) return;
  int saved = errno;
  s->depth = backtrace(s->stack, STACK_DEPTH);
  atomic_store(&s->taken, seq);
  atomic_fetch_add(&g_taken, 1);
  errno = saved;
}

static void sample_once(uint64_t after_us) {
  uint64_t now = rrpc__now_us();
  pthread_mutex_lock(&g_mu);
  for (struct slot *s = g_slots; s != NULL; s = s->next) {
    uint64_t start = atomic_load(&s->start_us);
    int seq = atomic_load(&s->seq);
    if (start == 0 || now - start < after_us || atomic_load(&s->sent) == seq) continue;
    atomic_store(&s->sent, seq);
    pthread_sigqueue(s->thread, stack_signal(), (union sigval){.sival_int = seq});
  }
  pthread_mutex_unlock(&g_mu);
}

static void *sampler_main(void *arg) {
  (void)arg;
  void *warm[4];
  (void)backtrace(warm, 4); /* loads the unwinder here, not in a handler */
  for (;;) {
    uint64_t after = atomic_load(&g_after_us);
    /* A period, not synchronisation: how often to look. */
    uint64_t period_us = after ? after / 4 : 100000;
    if (period_us < 1000) period_us = 1000;
    struct timespec ts = {(time_t)(period_us / 1000000), (long)(period_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
    if (after != 0) sample_once(after);
  }
  return NULL;
}

void rrpc__loop_stack_sampling(uint64_t after_us) {
  atomic_store(&g_after_us, after_us);
  if (after_us == 0) return;
  pthread_mutex_lock(&g_mu);
  if (!g_started) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    pthread_t t;
    if (sigaction(stack_signal(), &sa, NULL) == 0 && pthread_create(&t, NULL, sampler_main, NULL) == 0) {
      pthread_detach(t);
      g_started = 1;
    }
  }
  pthread_mutex_unlock(&g_mu);
}

void rrpc__loop_stack_thread(int on) {
  struct slot *s = &tls_slot;
  pthread_mutex_lock(&g_mu);
  if (on && !tls_registered) {
    /* Loop threads block every signal meant for the process; this one is
     * only ever sent to a given thread (pthread_sigqueue). */
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, stack_signal());
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    s->thread = pthread_self();
    s->next = g_slots;
    g_slots = s;
    tls_registered = 1;
  } else if (!on && tls_registered) {
    for (struct slot **p = &g_slots; *p != NULL; p = &(*p)->next) {
      if (*p == s) {
        *p = s->next;
        break;
      }
    }
    tls_registered = 0;
  }
  pthread_mutex_unlock(&g_mu);
}

void rrpc__loop_stack_begin(uint64_t start_us) {
  if (!tls_registered) return;
  atomic_fetch_add(&tls_slot.seq, 1);
  atomic_store(&tls_slot.start_us, start_us);
}

void rrpc__loop_stack_end(int report) {
  if (!tls_registered) return;
  atomic_store(&tls_slot.start_us, 0);
  if (!report || atomic_load(&tls_slot.taken) != atomic_load(&tls_slot.seq)) return;
  static const char head[] = "  its stack while it ran long (addr2line -f -e FILE OFFSET):\n";
  ssize_t w = write(STDERR_FILENO, head, sizeof head - 1);
  (void)w;
  backtrace_symbols_fd(tls_slot.stack, tls_slot.depth, STDERR_FILENO);
}

uint64_t rrpc__loop_stacks_taken(void) { return atomic_load(&g_taken); }
