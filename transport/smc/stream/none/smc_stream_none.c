// transport/smc/stream/none/smc_stream_none.c - rrpc/smc_stream.h in a build without RDMA
// (no verbs to drive a link with): every call answers -ENOSYS.
#include <errno.h>

#include "rrpc/smc_stream.h"

int rrpc_smc_stream_connect(int tcp_fd, const struct rrpc_smc_stream_opts *o,
                            rrpc_smc_stream **out, uint32_t *decline) {
  (void)tcp_fd, (void)o, (void)out;
  *decline = 0;
  return -ENOSYS;
}

int rrpc_smc_stream_accept(int tcp_fd, const struct rrpc_smc_stream_opts *o,
                           rrpc_smc_stream **out, uint32_t *declined) {
  (void)tcp_fd, (void)o, (void)out;
  *declined = 0;
  return -ENOSYS;
}

int rrpc_smc_stream_write(rrpc_smc_stream *s, const void *buf, size_t len) {
  (void)s, (void)buf, (void)len;
  return -ENOSYS;
}

int rrpc_smc_stream_shutdown(rrpc_smc_stream *s) {
  (void)s;
  return -ENOSYS;
}

long rrpc_smc_stream_read(rrpc_smc_stream *s, void *buf, size_t len) {
  (void)s, (void)buf, (void)len;
  return -ENOSYS;
}

int rrpc_smc_stream_close(rrpc_smc_stream *s, struct rrpc_smc_stream_stats *final,
                          int keep_link) {
  (void)s, (void)final, (void)keep_link;
  return -ENOSYS;
}

void rrpc_smc_stream_end_parked(void) {}

unsigned rrpc_smc_stream_await_test_link(rrpc_smc_stream *s, unsigned count, int max_ms) {
  (void)s, (void)count, (void)max_ms;
  return 0;
}

const struct rrpc_smc_stream_stats *rrpc_smc_stream_counters(const rrpc_smc_stream *s) {
  (void)s;
  return 0;
}
