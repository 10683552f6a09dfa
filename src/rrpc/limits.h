/* rrpc/limits.h - process-wide limits that keep hostile or overloaded peers
 * from taking memory or CPU without bound, and the counters that show when
 * a limit bites. docs/security.md lists every limit with its flag.
 *
 * Per-server limits (idle timeout, concurrency) live in rrpc_server_options;
 * these are the ones a connection cannot know on its own: bytes buffered by
 * every connection of the process together, and per-connection queues whose
 * size is a process policy (brpc keeps them as flags too).
 */
#ifndef RRPC_LIMITS_H
#define RRPC_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Zero means default for every field; new fields only at the end. */
typedef struct rrpc_limits {
  /* max_input_bytes (flag rrpc_max_input_bytes): bytes that all connections
   * together may hold in their read buffers as frames not yet complete.
   * Complete frames are always handed on first; a connection whose partial
   * frame would take the total past this fails (that connection only).
   * 0 = 1 GiB. The per-connection bound is the server's max_body_size. */
  size_t max_input_bytes;
  /* socket_max_unwritten_bytes (brpc's flag): bytes queued for writing on
   * one connection. A write that finds more than this queued fails with
   * -RRPC_EOVERCROWDED (a client call fails; a server response that cannot
   * be queued fails its connection). Reading from a server connection
   * pauses while more than half of it is queued (back-pressure), and
   * resumes once the queue is under a quarter. 0 = 64 MiB. */
  size_t socket_max_unwritten_bytes;
  /* max_unwritten_bytes (flag rrpc_max_unwritten_bytes): the same, summed
   * over every connection of the process. 0 = 1 GiB. */
  size_t max_unwritten_bytes;
  /* clc_sniff_timeout_ms (flag rrpc_clc_sniff_timeout_ms): a TCP server
   * connection whose first bytes may be an SMC-R CLC message must complete
   * it within this time, or it is closed. 0 = 2000. */
  int clc_sniff_timeout_ms;
  /* socket_max_pending_requests (flag rrpc_socket_max_pending_requests):
   * requests read from one server connection and not answered yet; at it,
   * the server stops reading that connection until half are answered
   * (back-pressure for handlers on the worker pool, whose responses come
   * later than the reads). 0 = 1024. */
  int socket_max_pending_requests;
} rrpc_limits;

/* rrpc_limits_set - replace the limits (copied; NULL = defaults). Applies to
 * every later read and write of every connection. Any thread. */
void rrpc_limits_set(const rrpc_limits *l);
/* rrpc_limits_get - the limits in force, defaults filled in. Any thread. */
void rrpc_limits_get(rrpc_limits *out);

/* Counters (process-wide). "now" values go up and down; the rest only up. */
typedef struct rrpc_limit_stats {
  uint64_t input_bytes;              /* now: bytes held as partial frames */
  uint64_t unwritten_bytes;          /* now: bytes queued for writing */
  uint64_t input_limit_closes;       /* connections failed by max_input_bytes */
  uint64_t overcrowded_writes;       /* writes refused with EOVERCROWDED */
  uint64_t read_pauses;              /* times reading paused for back-pressure */
  uint64_t clc_sniff_timeouts;       /* connections closed by clc_sniff_timeout_ms */
  uint64_t accept_fd_exhausted;      /* accepts that met EMFILE/ENFILE */
  uint64_t idle_closes;              /* connections closed by a server's idle timeout */
  uint64_t concurrency_rejects;      /* requests refused with ELIMIT */
  uint64_t logoff_rejects;           /* requests refused with ELOGOFF (stopping) */
  uint64_t brpc_hello_errors;        /* connections closed for a malformed brpc RDMA
                                        hello or ACK (docs/from-brpc.md) */
} rrpc_limit_stats;

/* rrpc_limit_stats_get - a snapshot of the counters. Any thread. */
void rrpc_limit_stats_get(rrpc_limit_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_LIMITS_H */
