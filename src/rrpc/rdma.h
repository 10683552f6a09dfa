/* rrpc/rdma.h - process-wide RDMA settings and user memory registration.
 *
 * Channels and servers opt in with `use_rdma` in their options. The RDMA
 * runtime starts on first use with the settings given here (or defaults).
 * In a build without RDMA every function returns -RRPC_ENORDMA.
 */
#ifndef RRPC_RDMA_H
#define RRPC_RDMA_H

#include <stddef.h>
#include <stdint.h>

#include "rrpc/iobuf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Zero or NULL means default for every field; new fields only at the end.
 * Names follow brpc's flags where the meaning is the same. */
typedef struct rrpc_rdma_options {
  const char *device;              /* rdma_device: HCA name; NULL/"" = first with an ACTIVE port */
  int port;                        /* rdma_port: 0 = 1 */
  int gid_index_plus1;             /* rdma_gid_index + 1: 0 = auto (the RoCE v2 GID whose
                                      IPv4-mapped address is the TCP local address, then
                                      any v2, then v1); N > 0 forces GID index N - 1 */
  int sq_size;                     /* rdma_sq_size: 0 = 128 */
  int rq_size;                     /* rdma_rq_size: 0 = 128 */
  size_t ring_size;                /* rdma_ring_size: receive ring bytes per connection,
                                      16 KiB << n, at most 512 MiB (what a CLC
                                      Accept can announce; larger is -EINVAL); 0 = 1 MiB */
  size_t pool_initial_size_mb;     /* rdma_memory_pool_initial_size_mb: 0 = 64 */
  size_t pool_increase_size_mb;    /* rdma_memory_pool_increase_size_mb: 0 = 64 */
  size_t pool_max_size_mb;         /* cap of the registered pool: 0 = 4096 */
  int use_polling;                 /* rdma_use_polling: busy-poll CQs instead of events */
  int trace_verbose;               /* rdma_trace_verbose: log every handshake step */
  int no_fallback;                 /* rdma_fallback=false: a connection that cannot use RDMA
                                      fails instead of falling back to TCP */
  int handshake_timeout_ms;        /* per CLC step; 0 = 2000 */
  size_t zerocopy_min_size;        /* rdma_zerocopy_min_size: with recv_zerocopy, received
                                      pieces at least this large reference the receive ring
                                      instead of being copied; 0 = 64 KiB */
  int recv_zerocopy;               /* rdma_recv_zerocopy: off by default. A received slice
                                      holds its ring space until the application drops it,
                                      and the ring drains in order: an application that keeps
                                      received iobufs while more data arrives on the same
                                      connection stalls it. Turn on only where received
                                      iobufs are dropped promptly (docs/rdma-transport.md) */
  int max_handshakes;              /* rdma_max_concurrent_handshakes: server-side RDMA
                                      handshakes in progress, process-wide (each holds a QP
                                      and a registered ring before the client proved
                                      anything); Proposals over it are declined and the
                                      client goes on over TCP; 0 = 64 */
  int close_wait_ms;               /* rdma_close_wait_ms: a closed connection keeps its QP
                                      until its close CDC has left, at most this long (the
                                      peer then learns of the close through TCP only;
                                      counted in close_unconfirmed); 0 = 1000 */
  int tcp_only_ttl_s;              /* rrpc_rdma_tcp_only_ttl_s: a server that closed the
                                      connection during the RDMA handshake (it predates CLC,
                                      e.g. brpc) is called again at once over plain TCP, and
                                      reached over TCP only, with no handshake, for so many
                                      seconds; 0 = 300; < 0 = never remembered (each new
                                      connection tries RDMA, then TCP once) */
  int dialect;                     /* rdma_dialect: what a client speaks (a server
                                      understands every dialect built in):
                                      RRPC_RDMA_DIALECT_AUTO (0, = IMM), _IMM (rrpc's CLC
                                      handshake and write-with-immediate ring), _BRPC
                                      (Apache brpc's hello v2 and SEND data path,
                                      docs/from-brpc.md), _CURSOR (SMC-R's WRITE + CDC
                                      cursors, docs/rdma-transport.md; RRPC_RDMA_DIALECT=cursor
                                      in the environment forces it too) */
  size_t registered_max_size_mb;   /* rdma_registered_max_size_mb: everything rrpc registers
                                      (pinned) at once, pool + rings + CDC slots; a
                                      connection whose ring would pass it falls back to TCP
                                      (counted in registered_cap_refused), the pool stops
                                      growing at it (-RRPC_EPOOL); 0 = 5120 (the pool's
                                      4096 + 1 GiB for rings) */
  int bg_queue_max;                /* rdma_bg_queue_max: verbs teardown jobs (QP destroy,
                                      window dealloc, deregistration) queued for the
                                      background verbs thread at once; over it a job runs on
                                      the closing loop (counted in bg_jobs_inline); 0 = 4096 */
  int bg_setup_threads;            /* rdma_bg_setup_threads: threads that make new connections'
                                      QPs and rings (a burst of handshakes is served this many
                                      at a time); 0 = the online CPUs, at least 2, at most 8 */
  int elastic;                     /* rdma_elastic: elastic receive rings
                                      (docs/elastic-rings.md), on by default: a connection
                                      whose peer offers them too pins granted pieces (an idle
                                      one ~5 KiB a side) instead of a ring; other peers get
                                      the ring. RRPC_RDMA_ELASTIC_ON (1), _OFF (-1: a ring per
                                      connection); 0 = the default
                                      (on). The environment variable RRPC_RDMA_ELASTIC=0|1
                                      overrides it (test runs of the whole suite) */
  int ring_idle_ms;                /* rdma_ring_idle_ms: elastic mode: after this long without
                                      data a connection hands back / shrinks to one 4 KiB
                                      piece per direction; 0 = 2000 */
  size_t retired_max_size;         /* rdma_retired_max_size: elastic mode, per connection:
                                      bytes of pieces retired while the application holds
                                      them (past it the stream waits for releases); half of
                                      it bounds the pieces that received zero-copy slices pin
                                      (past that, received bytes are copied);
                                      0 = 4 x ring_size (a 1 MiB message goes up uncopied) */
  size_t piece_cache_size_mb;      /* rdma_piece_cache_size_mb: elastic mode: cleared,
                                      registered pieces kept process-wide for grants (a grant
                                      past it waits for a refill; gauge piece_cached_bytes,
                                      counter piece_grant_refused); 0 = 8; at most
                                      registered_max_size_mb */
  size_t pool_low_water_mb;        /* rdma_memory_pool_low_water_mb: once less than this is
                                      left to carve in the pool's regions, the next region is
                                      registered on a background thread, ahead of need (a
                                      loop that runs out first waits for it: pool_grow_waits);
                                      0 = half of pool_increase_size_mb */
  int elastic_sq_size;             /* rdma_elastic_sq_size: send queue depth (WRs) of a
                                      connection that offers elastic rings (client) or takes
                                      them up (server). Every write and control message
                                      there spends one of the peer's 16 receive credits, so a
                                      deeper queue only costs memory: providers map the queue
                                      into the process (rxe: (n + 1) rounded up to a power of
                                      two, 512 B each: 31 = 16 KiB, 128 = 128 KiB). 0 = 31;
                                      8 .. 4096 */
  int brpc_ack_settle_us;          /* rdma_brpc_ack_settle_us: a brpc-dialect client waits so
                                      long after its ACK before its first data WR. A brpc
                                      server before apache/brpc#3505 parses the TCP ACK and
                                      the first RDMA bytes from one buffer on two threads;
                                      RDMA bytes that get there before the ACK is parsed make
                                      it close the connection. 0 = 20000; < 0 = no wait */
  int use_cm;                      /* rdma_use_cm: a client connects its QP through rdma_cm
                                      (librdmacm) instead of moving it INIT/RTR/RTS by hand;
                                      the CLC exchange still decides and tells the port.
                                      Always on where the device is iWARP (no other way to
                                      connect there). The environment variable
                                      RRPC_RDMA_USE_CM=0|1 overrides it */
  int cm_port;                     /* rdma_cm_port: the port a server's rdma_cm listener binds
                                      (iWARP's MPA runs over a real TCP connection to it, not
                                      to the service's port); 0 = any free port, announced in
                                      the CLC Accept; 0 .. 65535 */
  int cursor_stall_ms;             /* rdma_cursor_stall_ms: the cursor dialect fails a
                                      connection whose writes found the peer's ring full and
                                      no consumer-cursor update freed any of it for this long
                                      (a peer that never updates its cursor; counted in
                                      cursor_stalls). 0 = 60000; < 0 = never */
} rrpc_rdma_options;

enum {
  RRPC_RDMA_DIALECT_AUTO = 0,
  RRPC_RDMA_DIALECT_IMM = 1,
  RRPC_RDMA_DIALECT_CURSOR = 2,
  RRPC_RDMA_DIALECT_BRPC = 3,
};

/* rrpc_rdma_options.elastic: 0 is the default, so a zeroed struct gets it. */
enum {
  RRPC_RDMA_ELASTIC_OFF = -1,
  RRPC_RDMA_ELASTIC_DEFAULT = 0, /* = on */
  RRPC_RDMA_ELASTIC_ON = 1,
};

/* rrpc_rdma_options_init - fill with the defaults spelled out above
 * (zeroing the struct gives the same behaviour). */
void rrpc_rdma_options_init(rrpc_rdma_options *o);

/* rrpc_rdma_global_init - start the RDMA runtime with `o` (copied; NULL =
 * defaults). Idempotent: a later call returns -EALREADY and changes nothing.
 * Opens no device yet; devices open on first use. 0, -EALREADY,
 * -RRPC_ENORDMA. Thread-safe. */
int rrpc_rdma_global_init(const rrpc_rdma_options *o);

/* rrpc_rdma_available - 1 if this build has RDMA and a usable device with an
 * ACTIVE port exists, else 0. Opens the device on first call. */
int rrpc_rdma_available(void);

/* rrpc_rdma_register_memory - register [addr, addr+len) with every RDMA
 * device rrpc uses, so it can be sent without a copy. *region receives a
 * cookie to pass to rrpc_iobuf_append_user. The memory must stay valid
 * until rrpc_rdma_deregister_memory. 0, -EINVAL, -RRPC_ERDMAMEM (the
 * device refused), -RRPC_ENODEV, -RRPC_ENORDMA. */
int rrpc_rdma_register_memory(void *addr, size_t len, void **region);
/* rrpc_rdma_deregister_memory - undo; blocks still referencing the memory
 * must be gone. 0 or -EINVAL. */
int rrpc_rdma_deregister_memory(void *region);

/* Counters for tools and tests (monotonic, process-wide). */
typedef struct rrpc_rdma_stats {
  uint64_t connections_rdma;      /* handshakes that ended on RDMA */
  uint64_t connections_fallback;  /* connections that fell back to TCP */
  uint64_t fallback_last_reason;  /* SMC decline code of the last fallback */
  uint64_t bytes_written;         /* payload bytes RDMA-written */
  uint64_t bytes_received;
  uint64_t writes;                /* RDMA WRITE work requests */
  uint64_t cdc_sent;              /* CDC messages (pure ACKs/close) sent */
  uint64_t completions;           /* CQEs polled */
  uint64_t wakeups;               /* completion-channel events */
  uint64_t solicited;             /* messages sent with SOLICITED */
  uint64_t blocked_on_window;     /* times a sender waited for ring space or credits */
  uint64_t pool_bytes;            /* registered pool size */
  uint64_t handshakes_refused;    /* Proposals declined over max_handshakes */
  uint64_t handshakes_in_progress; /* server handshakes holding verbs resources now */
  uint64_t protocol_violations;   /* connections failed for breaking the ring protocol */
  uint64_t close_unconfirmed;     /* close CDCs not seen complete within close_wait_ms */
  /* Registered outside the pool, now (pool_bytes + ring_bytes + slot_bytes
   * is everything rrpc has registered): */
  uint64_t ring_bytes;            /* connections' receive rings (kept while zero-copy slices live)
                                     and elastic pieces (piece_cached_bytes + piece_used_bytes
                                     of it) */
  uint64_t slot_bytes;            /* connections' CDC receive slots: the slab they are carved from
                                     (64 KiB chunks per device, kept while the process runs), and
                                     the brpc dialect's send slots */
  uint64_t registered_cap_refused; /* registrations refused by registered_max_size_mb (a
                                      connection that fell back, a pool region not added) */
  /* Payload bytes rrpc copied, per direction (0 where the data path is
   * zero-copy): */
  uint64_t bytes_copied_send;     /* into registered memory to send them: bounce copies of blocks
                                     outside it, inline sends, brpc-dialect send slots */
  uint64_t bytes_copied_recv;     /* out of a receive ring or block into iobuf blocks */
  /* The background verbs thread (teardown off the loops): */
  uint64_t bg_jobs_queued;        /* jobs handed to it */
  uint64_t bg_jobs_done;          /* of those, finished (queued - done = its queue now) */
  uint64_t bg_jobs_inline;        /* jobs run on the submitting thread: queue full, no thread */
  uint64_t bg_queue_max_depth;    /* the deepest its queue has been */
  /* Elastic receive rings (docs/elastic-rings.md, --rdma_elastic): */
  uint64_t connections_elastic;   /* connections that came up with granted pieces, not a ring */
  uint64_t piece_grants;          /* pieces granted to peers (GRANT sent) */
  uint64_t piece_retires_held;    /* pieces retired while the application held them */
  uint64_t piece_retires_shrink;  /* released pieces retired to shrink an idle connection */
  uint64_t piece_handbacks;       /* pieces handed back by idle senders (HANDBACK received) */
  uint64_t piece_wants;           /* WANT messages sent (this side short of space) */
  uint64_t piece_retire_refused;  /* retires refused by --rdma_retired_max_size (the stream waits) */
  uint64_t piece_grant_refused;   /* grants that found no piece in the cache (waited for a refill) */
  uint64_t piece_table_full;      /* grants that found the receiver's piece table full (128 slots:
                                     granted + retired-but-still-held pieces): the stream waits
                                     for the application to release what it holds */
  uint64_t piece_cached_bytes;    /* cleared, registered pieces waiting in the cache, now */
  uint64_t piece_used_bytes;      /* pieces taken by connections (granted, full or held), now */
  /* Registered-pool growth (--rdma_memory_pool_low_water_mb): */
  uint64_t pool_grows_ahead;      /* regions added ahead of need on a background thread */
  uint64_t pool_grows_inline;     /* regions added on the allocating thread (none under way) */
  uint64_t pool_grow_waits;       /* allocations that waited for a growth under way */
  uint64_t blocked_on_send_queue; /* times a sender that had the peer's credits waited for
                                     slots of its own send queue (--rdma_sq_size, or
                                     --rdma_elastic_sq_size for elastic connections) */
  uint64_t ring_full_held;        /* ring mode: times a receive ring filled up while the
                                     application held zero-copy slices of it (--rdma_recv_zerocopy):
                                     its peer waits until they are dropped */
  uint64_t piece_bind_waits;      /* grants that waited for their connection's send queue to drain
                                     before binding the piece's window (Soft-RoCE re-runs a bind
                                     queued behind a retried WR: docs/elastic-rings.md) */
  /* rdma_cm setup (--rdma_use_cm, iWARP): */
  uint64_t cm_connects;           /* client QPs connected through rdma_cm */
  uint64_t cm_accepts;            /* server QPs accepted through rdma_cm */
  uint64_t cm_failures;           /* rdma_cm setups that failed (refused, unreachable, timed out,
                                     rejected, no listener): the connection fell back or failed */
  uint64_t cursor_stalls;         /* cursor-dialect connections failed after cursor_stall_ms
                                     with the peer's ring full and no consumer-cursor update */
  uint64_t cm_port_retries;       /* rdma_cm connects retried with a fresh id because TCP could not
                                     use the local port rdma_cm picked (iWARP: in use, or TIME_WAIT
                                     to the same listener) */
  uint64_t closes_after_held;     /* peer closes heard while received bytes were held back (the
                                     owner had paused reading): the stream ends after those bytes */
} rrpc_rdma_stats;
/* rrpc_rdma_get_stats - copy the counters. 0 or -RRPC_ENORDMA. */
int rrpc_rdma_get_stats(rrpc_rdma_stats *out);

/* Kernel SMC-R peers (docs/kernel-smc.md): the user EIDs rrpc offers and
 * accepts in SMC-Rv2 CLC messages, and the pnet table pairing a netdev with
 * the RDMA device and port for its connections. Both work in every build (no
 * RDMA needed to configure) and may be called at any time; a later handshake
 * reads the values current then.
 * rrpc_smc_set_ueids - "EID[,EID...]": at most 4, each 1..32 characters,
 *   A-Z/0-9 first, then also '.' and '-' (the kernel's rules); "" = none.
 * rrpc_smc_set_pnet - "NETDEV=IBDEV[:PORT][,...]": at most 8, port 1 by
 *   default; "" = none.
 * Return 0, or -EINVAL leaving the old value in place, with *why (when not
 * NULL) set to a static text. The flags --smc_ueid and --smc_pnet call them. */
int rrpc_smc_set_ueids(const char *csv, const char **why);
int rrpc_smc_set_pnet(const char *spec, const char **why);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_RDMA_H */
