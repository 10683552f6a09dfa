/* rrpc/log.h - the library's pluggable log sink.
 *
 * rrpc never prints on its own: every message goes through one process-wide
 * sink. The default sink writes "<L> file:line] text" lines to stderr for
 * messages at or above the minimum level. The C++ face installs a sink that
 * forwards to glog.
 */
#ifndef RRPC_LOG_H
#define RRPC_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rrpc_log_level {
  RRPC_LOG_DEBUG = 0,
  RRPC_LOG_INFO = 1,
  RRPC_LOG_WARNING = 2,
  RRPC_LOG_ERROR = 3,
} rrpc_log_level;

/* A sink receives one formatted message (no trailing newline). It may be
 * called from any rrpc thread, concurrently; it must not call back into rrpc
 * functions that log. `file` and `msg` are borrowed for the call only. */
typedef void (*rrpc_log_sink)(void *arg, rrpc_log_level level,
                              const char *file, int line, const char *msg);

/* rrpc_log_set_sink - install `sink` (NULL restores the stderr default).
 * Thread-safe; messages already being emitted may still reach the old sink. */
void rrpc_log_set_sink(rrpc_log_sink sink, void *arg);

/* rrpc_log_set_min_level - drop messages below `level` before formatting.
 * Default: RRPC_LOG_INFO. Thread-safe. */
void rrpc_log_set_min_level(rrpc_log_level level);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_LOG_H */
