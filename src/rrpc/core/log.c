/* log.c - the process-wide log sink (rrpc/log.h) and its stderr default. */
#include "rrpc/internal/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

struct sink_slot {
  rrpc_log_sink fn;
  void *arg;
};

static _Atomic(int) g_min_level = RRPC_LOG_INFO;
/* The sink and its argument change together; a tiny spin lock keeps the
 * pair consistent without making the hot "is it enabled" check pay for it. */
static atomic_flag g_lock = ATOMIC_FLAG_INIT;
static struct sink_slot g_sink;

static void lock(void) {
  while (atomic_flag_test_and_set_explicit(&g_lock, memory_order_acquire)) {
  }
}
static void unlock(void) { atomic_flag_clear_explicit(&g_lock, memory_order_release); }

void rrpc_log_set_sink(rrpc_log_sink sink, void *arg) {
  lock();
  g_sink.fn = sink;
  g_sink.arg = arg;
  unlock();
}

void rrpc_log_set_min_level(rrpc_log_level level) { atomic_store(&g_min_level, (int)level); }

int rrpc__log_enabled(rrpc_log_level level) { return (int)level >= atomic_load(&g_min_level); }

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

void rrpc__log(rrpc_log_level level, const char *file, int line, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  lock();
  struct sink_slot s = g_sink;
  unlock();
  if (s.fn != NULL) {
    s.fn(s.arg, level, file, line, msg);
    return;
  }
  static const char tag[] = "DIWE";
  fprintf(stderr, "%c %s:%d] %s\n", tag[level & 3], base_name(file), line, msg);
}
