/* rrpc/server.h - serving methods over baidu_std (TCP or RDMA).
 *
 * A handler receives the request bytes (the serialized message) and the
 * controller (attachments, remote side) and must respond exactly once with
 * rrpc_server_call_respond, at once or later, from any thread.
 */
#ifndef RRPC_SERVER_H
#define RRPC_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "rrpc/controller.h"
#include "rrpc/iobuf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rrpc_server rrpc_server;
typedef struct rrpc_server_call rrpc_server_call;

/* Server options. Zero means default for every field; new fields are only
 * ever added at the end. */
typedef struct rrpc_server_options {
  int num_threads;         /* event loop threads; 0 = share the process-wide loops */
  int use_rdma;            /* 1: offer RDMA (SMC-R CLC handshake); clients that
                              do not ask for it are served over TCP */
  int handlers_in_pool;    /* kept for compatibility: handlers run on the
                              worker pool by default (see handlers_in_loop) */
  int pool_threads;        /* worker pool size; 0 = the CPU count, at least 4 */
  size_t max_body_size;    /* 0 = 64 MiB */
  int idle_timeout_s;      /* brpc's idle_timeout_sec: a connection that has read
                              and written nothing for this many seconds is
                              closed (counted in idle_closes); 0 or less = never */
  int handlers_in_loop;    /* 1: run handlers on the loop thread that read the
                              request (the fastest mode; handlers must then
                              never block). Per method: rrpc_server_set_method_mode */
  int pool_queue_max;      /* requests waiting for a pool thread, at most; one
                              over it fails with RRPC_EOVERCROWDED. 0 = 65536 */
  int max_concurrency;     /* brpc's max_concurrency: requests running in handlers
                              at once; one more fails at once with ELIMIT
                              (counted in concurrency_rejects); 0 = no limit */
  int no_builtin_services; /* 1: do not answer HTTP on this port (the builtin
                              pages /status, /vars, /connections, ...; see
                              docs/observability.md for serving them on a
                              separate internal port instead) */
  int pool_rescue_us;      /* a pool thread that takes a request while more wait
                              leaves them to itself and the next request's
                              thread; if none is taken for this long (its
                              handler blocked), an idle thread is woken for them
                              (counted: rrpc_server_pool_rescues). 0 = 1000;
                              negative = wake the next thread at once, as
                              before (a futex wake per request at saturation) */
  int pool_batch_sched;    /* positive: pool threads run under SCHED_BATCH - a
                              woken one does not preempt a busy loop but runs
                              when it sleeps or its slice ends (fewer context
                              switches when threads outnumber cores; never with
                              busy-polling loops, which do not sleep:
                              docs/threads.md). 0 (default) or negative:
                              SCHED_OTHER. Threads a handler starts inherit it */
  int pool_busy_queue;     /* positive: requests that arrive while pool threads
                              are busy in short handlers (pool_short_task_us)
                              wake no idle thread while at most this many wait
                              per busy one: the busy ones take them as they
                              finish (counted: rrpc_server_pool_left_to_busy).
                              For hosts where idle workers outnumber busy
                              cores. 0 (default) or negative: off - a busy
                              worker that was preempted has no wake-up to hurry
                              it, so on oversubscribed cores (busy-polling
                              loops) requests waited for time slices
                              (docs/threads.md) */
  int pool_short_task_us;  /* handlers averaging at most this long count as
                              short for pool_busy_queue (every 8th request a
                              thread runs is timed). 0 = 50; negative = never
                              leave requests to busy threads */
  int pool_write_flush_us; /* a pool thread writes its responses itself: those
                              to a connection with more requests in handlers
                              are gathered over its run of requests and leave
                              in one write when it finds no request waiting;
                              a response waits at most about this long behind
                              a handler that blocks (the rescuer flushes it:
                              rrpc_server_pool_write_rescues). 0 = 1000;
                              negative = off: such responses are queued for
                              the connection's loop to write. Needs
                              pool_rescue_us >= 0 */
} rrpc_server_options;

/* Where a method's handler runs. */
typedef enum rrpc_run_mode {
  RRPC_RUN_DEFAULT = 0, /* the server's choice (handlers_in_loop) */
  RRPC_RUN_IN_POOL = 1, /* a worker pool thread: may block, may call other
                           services synchronously */
  RRPC_RUN_IN_LOOP = 2, /* the loop thread: no thread hop, must not block;
                           a synchronous rrpc call from it fails with EDEADLK */
} rrpc_run_mode;

/* A handler. Runs on a worker pool thread (by default) or on a loop thread
 * (RRPC_RUN_IN_LOOP); `call` is owned by
 * rrpc until rrpc_server_call_respond is called with it. */
typedef void (*rrpc_handler_fn)(void *arg, rrpc_server_call *call);

/* rrpc_server_new - opts may be NULL (all defaults). 0 or -ENOMEM, -EINVAL. */
int rrpc_server_new(const rrpc_server_options *opts, rrpc_server **out);

/* rrpc_server_add_method - route "service_full_name" (package.Service) +
 * method to fn(arg, call). Strings are copied; `arg` is borrowed and must
 * outlive the server. Only before start. 0, -EEXIST, -EBUSY (started),
 * -EINVAL, -ENOMEM. */
int rrpc_server_add_method(rrpc_server *s, const char *service_full_name, const char *method,
                           rrpc_handler_fn fn, void *arg);

/* rrpc_server_set_method_max_concurrency - like max_concurrency, for one
 * method (brpc's MaxConcurrencyOf); 0 = no limit of its own. Both limits
 * apply. Only before start. 0, -ENOENT (no such method), -EBUSY, -EINVAL. */
int rrpc_server_set_method_max_concurrency(rrpc_server *s, const char *service_full_name,
                                           const char *method, int max_concurrency);

/* rrpc_server_set_method_mode - where service.method's handler runs,
 * overriding the server's default. Only before start. 0, -ENOENT (no such
 * method), -EBUSY (started), -EINVAL. */
int rrpc_server_set_method_mode(rrpc_server *s, const char *service_full_name, const char *method,
                                rrpc_run_mode mode);

/* rrpc_server_pool_rejected - requests failed with RRPC_EOVERCROWDED because
 * the worker queue was full (pool_queue_max), since start. Any thread. */
uint64_t rrpc_server_pool_rejected(const rrpc_server *s);
/* rrpc_server_pool_rescues - how often a pool thread was woken for requests
 * that waited behind a blocked handler (pool_rescue_us). Any thread. */
uint64_t rrpc_server_pool_rescues(const rrpc_server *s);
/* rrpc_server_pool_write_rescues - how often the pool's rescuer wrote a pool
 * thread's gathered responses because it stayed inside one handler
 * (pool_write_flush_us). Any thread. */
uint64_t rrpc_server_pool_write_rescues(const rrpc_server *s);
/* rrpc_server_pool_left_to_busy - batches of requests that woke no idle pool
 * thread because busy ones were to take them (pool_busy_queue). Any thread. */
uint64_t rrpc_server_pool_left_to_busy(const rrpc_server *s);

/* rrpc_server_start - listen on "ip:port", ":port", "port", "[ipv6]:port"
 * ("[::]:port" for every address), or "unix:/path" (a unix stream socket:
 * never RDMA; a stale socket file left by a dead server is replaced, one a
 * live server listens on is not: -EADDRINUSE; the file is removed when the
 * server stops); port 0 picks a free one (see rrpc_server_port). 0,
 * -EADDRINUSE, -EINVAL, -RRPC_ENORDMA (use_rdma in a build without RDMA),
 * or another -errno. */
int rrpc_server_start(rrpc_server *s, const char *addr);
/* rrpc_server_port - the bound port (0 on a unix socket), or a negative code
 * before start. */
int rrpc_server_port(const rrpc_server *s);

/* rrpc_server_shutdown - stop gracefully: stop accepting; requests that
 * arrive from now on are answered with ELOGOFF (2003: not executed, safe to
 * send elsewhere; counted in logoff_rejects); handlers already running may
 * respond and their responses are written out; then every connection is
 * closed. Waits at most closewait_ms for the running handlers and the
 * queued responses (0 = not at all); what is still pending then is cut off
 * (its clients see ECLOSE). Idempotent. Blocks until the listener and the
 * connections are closed. Any thread except a loop thread. */
void rrpc_server_shutdown(rrpc_server *s, int closewait_ms);
/* rrpc_server_stop - rrpc_server_shutdown(s, 0): close at once. Handlers
 * still running may respond; those responses are dropped. */
void rrpc_server_stop(rrpc_server *s);
/* rrpc_server_free - stop if needed, wait for handlers that are still
 * holding calls to respond, and free. */
void rrpc_server_free(rrpc_server *s);

/* ---- inside a handler ---------------------------------------------------- */

/* The request message bytes (no attachment). Borrowed from the call. */
const rrpc_iobuf *rrpc_server_call_request(const rrpc_server_call *call);
/* The call's controller: request/response attachments, set_failed, remote
 * side. Borrowed from the call. */
rrpc_controller *rrpc_server_call_controller(rrpc_server_call *call);
const char *rrpc_server_call_service(const rrpc_server_call *call);
const char *rrpc_server_call_method(const rrpc_server_call *call);

/* rrpc_server_call_respond - send the response (`response` may be NULL for
 * an empty message; its blocks are SHARED, the caller keeps its iobuf) and
 * release the call, which must not be used afterwards. If the controller
 * was set failed, the error goes back instead of the message. Exactly once
 * per call, from any thread. Returns 0 or -RRPC_ECLOSE when the connection
 * is gone (the call is released either way). */
int rrpc_server_call_respond(rrpc_server_call *call, const rrpc_iobuf *response);
/* rrpc_server_call_respond_hold - send the response as rrpc_server_call_respond
 * does (same returns, any thread, never blocks), but keep the call: its
 * controller and request stay readable (for work done after the response
 * left, brpc's after_rpc_resp_fn) until rrpc_server_call_release. The call
 * still counts as running (Stop's closewait, max_concurrency, the
 * connection's pending requests) until then. Exactly once per call, instead
 * of rrpc_server_call_respond. */
int rrpc_server_call_respond_hold(rrpc_server_call *call, const rrpc_iobuf *response);
/* rrpc_server_call_release - release a call answered with
 * rrpc_server_call_respond_hold; it must not be used afterwards. Once, any
 * thread, never blocks. */
void rrpc_server_call_release(rrpc_server_call *call);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_SERVER_H */
