// log_sink.cc - routes the C core's log messages to glog, at the same
// severity, keeping the core's file:line. Installed once per process by the
// first Server or Channel.
#include <glog/logging.h>

#include <mutex>

#include "rrpc/cxx/detail.h"
#include "rrpc/log.h"

namespace rrpc {
namespace detail {

namespace {
// Called by the core from any of its threads, concurrently; glog is
// thread-safe. Must not log through rrpc (it does not).
void GlogSink(void* /*arg*/, rrpc_log_level level, const char* file, int line, const char* msg) {
  google::LogSeverity severity = google::GLOG_ERROR;
  switch (level) {
    case RRPC_LOG_DEBUG:
      if (!VLOG_IS_ON(1)) return;
      severity = google::GLOG_INFO;
      break;
    case RRPC_LOG_INFO:
      severity = google::GLOG_INFO;
      break;
    case RRPC_LOG_WARNING:
      severity = google::GLOG_WARNING;
      break;
    case RRPC_LOG_ERROR:
      severity = google::GLOG_ERROR;
      break;
  }
  google::LogMessage(file, line, severity).stream() << msg;
}
}  // namespace

void InitRuntimeOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    // --v=1 (glog's verbosity) also lets the core's debug messages through.
    rrpc_log_set_min_level(VLOG_IS_ON(1) ? RRPC_LOG_DEBUG : RRPC_LOG_INFO);
    rrpc_log_set_sink(GlogSink, nullptr);
  });
}

}  // namespace detail
}  // namespace rrpc
