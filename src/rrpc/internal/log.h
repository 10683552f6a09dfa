/* internal/log.h - private to rrpc: the logging entry point used by the core
 * and the transports. Public control of the sink is in rrpc/log.h. */
#ifndef RRPC_INTERNAL_LOG_H
#define RRPC_INTERNAL_LOG_H

#include "rrpc/log.h"

/* rrpc__log_enabled - cheap check so callers skip formatting work. */
int rrpc__log_enabled(rrpc_log_level level);

/* rrpc__log - format and hand one message to the sink. Thread-safe. */
void rrpc__log(rrpc_log_level level, const char *file, int line,
               const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#define RRPC_LOG(level, ...)                                     \
  do {                                                           \
    if (rrpc__log_enabled(RRPC_LOG_##level))                     \
      rrpc__log(RRPC_LOG_##level, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#endif /* RRPC_INTERNAL_LOG_H */
