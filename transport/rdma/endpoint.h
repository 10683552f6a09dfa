/* transport/rdma/endpoint.h - private to the RDMA transport: one RDMA
 * connection (an "endpoint") hung on an rrpc socket. endpoint.c owns its
 * verbs resources and the transport ops, handshake.c the SMC-R CLC
 * handshake over the TCP connection, datapath.c the ring data path.
 *
 * Locking: the data path (`dp`, struct rrpc__ep_dp) has its own lock,
 * dp.mu, that guards the windows, the send queue and every post to the QP
 * (the writer may be any thread; acks arrive on the loop thread; ring blocks
 * are released on whatever thread drops them). Handshake state and the read
 * buffer belong to the socket's loop thread. Drop iobuf references after
 * unlocking `mu` where possible (a ring slice's deleter takes the mu of its
 * endpoint); one dropped under any endpoint's mu (an allocation failed and
 * it could not be moved out) is released once this thread holds no
 * endpoint's mu any more (ep_lock.c), never in place.
 *
 * Fields are grouped by owner: `hs` (the handshake, loop thread), `vb` (verbs
 * resources, one create/destroy order in endpoint.c), what the handshake
 * agreed (read-only once UP), and `dp` (the data path, under dp.mu).
 *
 * Lifetime: refcounted - one reference for the socket (dropped in the ops'
 * close) and one per zero-copy ring slice handed to the application, so the
 * ring's memory outlives the connection while anyone still reads it. */
#ifndef RRPC_TRANSPORT_RDMA_ENDPOINT_H
#define RRPC_TRANSPORT_RDMA_ENDPOINT_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "rrpc/internal/lock.h"
#include "rrpc/transport.h"
#include "transport/rdma/cm/cm.h"
#include "transport/rdma/cqs.h"
#include "transport/rdma/device.h"
#include "transport/rdma/dp.h"
#include "transport/rdma/pool.h"
#include "transport/rdma/verbs_bg.h"
#include "transport/smc/clc.h"
#include "transport/rdma/wire/cursor_window.h"
#include "transport/rdma/wire/pieces.h"
#include "transport/rdma/wire/rx_reclaim.h"
#include "transport/rdma/wire/window.h"

struct rrpc__piece; /* imm/pieces_mem.h: elastic mode's memory, owned by the imm dialect */
struct rrpc__rdma_dialect; /* dialect.h: whose data path this connection runs */

/* Handshake and life states, client and server in one enum. */
typedef enum rrpc__ep_state {
  EP_NEW = 0,
  EP_SERVER_WAIT_PROPOSAL, /* server: peeking at the client's first bytes */
  EP_CLIENT_WAIT_ACCEPT,   /* client: Proposal sent */
  EP_SERVER_WAIT_CONFIRM,  /* server: Accept sent */
  EP_CLIENT_WAIT_READY,    /* client: Confirm sent, waiting for the first CDC */
  EP_UP,                   /* RDMA carries the data */
  EP_FAILED,
} rrpc__ep_state;

const char *rrpc__ep_state_name(rrpc__ep_state st);

/* QP retry settings, both setups (endpoint.c's qp_connect, cm/cm.c):
 * finite, see qp_connect. */
#define RRPC_EP_ACK_TIMEOUT 14
#define RRPC_EP_RETRY_CNT 6
#define RRPC_EP_RNR_RETRY 6

/* Receive slots hold SENDs (CDC messages); data goes into the ring. */
#define RRPC_EP_SLOT_SIZE 64

struct rrpc__ep_inflight {
  uint64_t seq;    /* the WR sequence number it ends at */
  rrpc_iobuf buf;  /* the bytes those WRs read (SHARED blocks) */
};

/* Handshake state: owned by the socket's loop thread while the CLC
 * handshake runs (handshake.c's state machine); the slot may be given back
 * from any thread. */
struct rrpc__ep_hs {
  uint8_t buf[RRPC_CLC_MAX_LEN]; /* the CLC message being read */
  size_t len;
  uint8_t out[RRPC_CLC_MAX_LEN]; /* the one to send (RRPC_HS_SEND) */
  size_t out_len;
  rrpc__timer_id timer; /* the step's deadline: endpoint.c arms and cancels it */
  int gid_index;
  union ibv_gid gid;
  uint8_t mac[6];  /* of the netdev behind the chosen GID */
  atomic_int slot; /* server: holds one of --rdma_max_concurrent_handshakes */
};

/* Verbs resources: created by rrpc__ep_verbs_create and destroyed in the
 * reverse order by endpoint.c (loop thread); the data path uses them. */
struct rrpc__ep_verbs {
  struct rrpc__cq_member cqm; /* in the loop's shared CQs (cqs.h) */
  struct ibv_qp *qp;
  int qp_watched;
  int polling; /* busy-poll on the loop instead of completion events */
  /* my receive ring (the peer writes into it) and the CDC slots */
  char *ring;
  uint32_t ring_size;
  size_t budget;                 /* ring + slot bytes taken from the registered cap */
  struct ibv_mr *ring_mr;        /* LOCAL_WRITE (+ MW_BIND): no remote access of its own */
  struct ibv_mw *ring_mw;        /* type-2 window over the ring, bound to this QP only */
  uint32_t ring_rkey;            /* the key the peer writes with (the window's, once bound) */
  rrpc__rdma_region ring_region; /* so ring slices can be sent on, zero-copy */
  char *slots;
  struct ibv_mr *slots_mr;
  uint32_t rq_size, sq_size;
  uint32_t max_send_sge;
  uint32_t max_inline; /* inline bytes this QP was granted (>= the device's probe) */
};

/* A closing connection's verbs objects, detached on its loop (out of the
 * shared CQs' dispatch table first, so late completions are dropped and
 * counted) and destroyed on the background verbs thread (verbs_bg.h) in the
 * order verbs_destroy always used. Holds a reference on the endpoint, so the
 * ring is deregistered (and its budget given back) there too unless a
 * zero-copy slice still holds it. Used once per endpoint. */
struct rrpc__ep_teardown {
  struct rrpc__bg_job job;
  struct rrpc__rdma_ep *ep;
  struct ibv_mw *mw;
  struct ibv_qp *qp;
  struct rrpc__cq_member cqm; /* a copy: removed from the table, left after the QP */
  struct ibv_mr *slots_mr;
  char *slots;
  size_t slots_len;
  struct rrpc__ep_inflight *inflight; /* n entries, released after the QP is gone */
  uint32_t n_inflight;
  struct rdma_cm_id *cm_id;           /* rdma_cm setup: destroyed after the QP */
  struct rdma_event_channel *cm_ch;
};

/* The verbs resources of a handshake's CREATE step, made on the background
 * verbs thread (the loop only joins the shared CQs): the QP in INIT with
 * its receives posted, the ring registered and cleared, the slots. The loop
 * installs them into vb when the job is done (endpoint.c), or tears them
 * down if the connection went meanwhile. Holds a reference on the endpoint
 * while under way. Used once per endpoint. */
struct rrpc__ep_create {
  struct rrpc__bg_job job;
  struct rrpc__rdma_ep *ep;
  struct rrpc__ep_verbs vb;
  struct rrpc__ep_inflight *inflight;
  int rc; /* 0 or the first failing step's code (cause kept: EMFILE, ENOMEM, EPOOL) */
};

/* Elastic mode's state (docs/elastic-rings.md), in the data path: under
 * dp.mu like the rest of it. `tx` is my view of the peer's pieces (I write
 * them), `rx` the pieces I granted the peer, `mem` their memory by id. */
struct rrpc__ep_el {
  struct rrpc__ptx tx;
  struct rrpc__prx rx;
  struct rrpc__ctl_seq seq;
  struct rrpc__piece *mem[RRPC_PIECES_SLOTS]; /* id - 1 -> memory, NULL when FREE */
  int waiting;        /* a grant waits for the piece cache (one wake-up queued) */
  int rx_after_fill;  /* the last write received filled its piece */
  rrpc__timer_id timer; /* the idle check (holds a reference on the endpoint) */
  uint64_t last_tx_us; /* data last written / received: the idle timer */
  uint64_t last_rx_us;
  /* Zero-copy slices out per piece, and the bytes of the pieces they pin
   * (a piece with any slice out cannot be returned, only retired whole). */
  uint32_t zc_slices[RRPC_PIECES_SLOTS];
  uint32_t zc_pin_len[RRPC_PIECES_SLOTS];
  uint64_t zc_pinned;
  uint32_t zc_npinned; /* pieces with a slice out */
  /* The last window bind posted (its WR id, piece id and length): what a
   * failed send completion names when it was that bind (diagnostics). */
  uint64_t bind_wr;
  uint16_t bind_id;
  uint32_t bind_len;
  /* A grant waits for the send queue to drain before it binds its window
   * (elastic_dp.c, bind_ready_locked): meanwhile every WR is signaled and
   * new data waits. */
  int bind_wait;
};

/* The data path: the windows, the cursors and the send queue's
 * bookkeeping, under `mu` (take it with rrpc__ep_lock): the writer may be
 * any thread, acks and completions arrive on the loop thread, ring slices
 * are released on whatever thread drops them. Once the QP is connected,
 * every field is read and written with mu held (before that, only the
 * loop thread sets it up). datapath.c owns it; endpoint.c sets it up
 * (windows, inflight ring, the window bind's WR) and marks the QP dead at
 * teardown under mu; describe.c reads it through rrpc__dp_view only. */
struct rrpc__ep_dp {
  rrpc__lock mu; /* one futex word (internal/lock.h): a pair every message */
  struct rrpc__tx_window tx;
  struct rrpc__rx_window rx;
  struct rrpc__rx_reclaim reclaim;
  uint64_t zc_outstanding; /* ring bytes handed out zero-copy, not yet released */
  int peer_asked;          /* the peer's last data message asked for an ACK */
  int write_blocked;       /* a write returned -EAGAIN; resume when room appears */
  int qp_dead;             /* posting failed or the QP errored: post nothing more */
  uint64_t wr_seq;         /* WRs posted so far */
  uint64_t wr_done;        /* WRs known complete */
  uint32_t unsignaled;
  uint64_t unsignaled_bytes;
  struct rrpc__ep_inflight *inflight; /* FIFO ring of sq_size entries */
  uint32_t if_head, if_count;
  uint16_t cdc_seq;      /* last CDC sequence number sent */
  uint64_t cdc_slot_wr;  /* WR of the last CDC sent from the slot (not inline) */
  int closed_sent;       /* the connection is closing: no writer posts any more */
  int close_heard;       /* the peer closed while received bytes were held back */
  uint8_t close_flags;   /* the close CDC's connection-state flags, 0 = none due */
  uint64_t close_wr;     /* the WR that carried it, 0 while not posted yet */
  struct rrpc__ep_el el; /* elastic mode only (ep->elastic) */
  /* The cursor dialect's (cursor/cursor_dp.c) in place of tx/rx. */
  struct rrpc__cur_window cur;
  int cur_blocked_sent;   /* a CDC saying "write blocked" went out since the last room */
  int cur_cdc_due;        /* data was written and no CDC has told it yet */
  uint64_t cur_blocked_us; /* when writes last found the peer's ring full (0: not) */
  rrpc__timer_id cur_timer; /* the stall check (holds a reference on the endpoint) */
};

/* What the shared poll gathered for one endpoint, handled once per poll
 * (rrpc__dp_after). Loop thread. */
struct rrpc__ep_poll {
  int got;         /* bytes went into the read buffer */
  int peer_closed; /* a CDC said the peer closed */
  int rc;          /* the first error: fails the socket */
  int flush_first; /* rc is a flush with no error before it: said in rrpc__dp_after
                      unless a real error follows in the same poll */
};

typedef struct rrpc__rdma_ep {
  atomic_int refs;
  rrpc__socket *s; /* borrowed; NULL once the socket let go */
  rrpc__loop *loop; /* the socket's loop: watchers and timers live there, also
                       while a closed connection waits for its close CDC */
  rrpc__timer_id close_timer; /* bounds that wait (loop thread) */
  rrpc__rdma_dev *dev;
  const rrpc_rdma_options *opts;
  int is_client;
  /* The data-path dialect (dialect.h): set when the endpoint is made and,
   * where the handshake picks another, before the QP connects; read-only
   * once UP. */
  const struct rrpc__rdma_dialect *dl;
  /* Written by the socket's loop thread (the handshake, fallback, failure);
   * read from any thread (writers, slice releases, is_rdma): atomic. */
  _Atomic rrpc__ep_state state;

  /* What the handshake agreed: written by it (loop thread) before the
   * connection is UP, read-only afterwards by every thread. */
  uint32_t my_psn;
  uint32_t my_token;
  struct rrpc__clc_accept peer; /* the peer's Accept or Confirm */
  int got_peer_data;            /* server: an RDMA message came from the client */
  int elastic;                  /* both offered elastic rings: pieces, no ring (set before
                                   the QP connects, read-only once UP) */
  int offer_elastic;            /* this side offers them (client) / may accept them (server) */

  struct rrpc__ep_hs hs;    /* handshake.c's, on the loop thread */
  struct rrpc__ep_cm cm;    /* cm/cm.c: rdma_cm setup (loop thread) */
  struct rrpc__ep_verbs vb; /* endpoint.c creates and destroys them, in one order */
  struct rrpc__ep_teardown td; /* endpoint.c: vb handed to the background thread */
  int td_used;                 /* td was submitted (loop thread) */
  struct rrpc__ep_create cj;   /* endpoint.c: vb being made off the loop */
  int creating;                /* cj is under way (loop thread) */
  int cj_used;                 /* cj was submitted (loop thread) */
  int ring_late;               /* a late ring (client, ring mode after an elastic offer) was asked for */

  /* Received ring bytes not handed to the socket while its reading is
   * paused (back-pressure): they keep their ring space, so the peer runs
   * out of window. Stream offsets; loop thread. */
  uint64_t held_start, held_len;
  rrpc_iobuf el_held; /* elastic mode: held bytes as slices of their pieces */

  struct rrpc__ep_poll pl; /* the shared poll's, loop thread */
  struct rrpc__ep_dp dp;   /* the data path, under its own lock */
  /* remote/carriage.c: its one-sided posts holding the QP now, and a bit
   * for the teardown waiting for them (zero at creation). */
  atomic_uint rmt_posts;
} rrpc__rdma_ep;

/* ---- ep_lock.c ---------------------------------------------------------- */
/* ep->mu, counted per thread (see ep_lock.c). Unlocking the last mu this
 * thread holds runs the slice releases deferred meanwhile. */
void rrpc__ep_lock(rrpc__rdma_ep *ep);
void rrpc__ep_unlock(rrpc__rdma_ep *ep);
/* 1 while this thread holds some endpoint's mu. */
int rrpc__ep_any_locked_here(void);
/* Run d->fn(d) once this thread holds no endpoint's mu (call only while it
 * holds one). Allocates nothing: d is embedded in what it releases. */
struct rrpc__ep_deferred {
  struct rrpc__ep_deferred *next;
  void (*fn)(struct rrpc__ep_deferred *d);
};
void rrpc__ep_defer(struct rrpc__ep_deferred *d);

/* ---- endpoint.c ---------------------------------------------------------- */
void rrpc__ep_unref(rrpc__rdma_ep *ep);
/* The endpoint of s while it carries data over RDMA in a dialect of the
 * shared machinery (imm, cursor), else NULL. Any thread. */
rrpc__rdma_ep *rrpc__rdma_ep_of(rrpc__socket *s);
/* A closed connection's close CDC completed (or failed): destroy the verbs
 * resources and drop the socket's reference. Loop thread. */
void rrpc__ep_close_finish(rrpc__rdma_ep *ep);
/* Bind the ring's window to the QP (a dialect's dp_connect, before anything
 * lets the peer write). 0 or a negative code. Loop thread. */
int rrpc__ep_ring_bind(rrpc__rdma_ep *ep);

/* ---- handshake.c --------------------------------------------------------- */
/* The handshake is a state machine: each input returns an outcome, which
 * endpoint.c applies (rrpc__ep_hs_apply). It never touches the verbs
 * resources, the data path, the deadline timer or the socket's life. */
enum rrpc__hs_do {
  RRPC_HS_CONTINUE,  /* wait for the next input */
  RRPC_HS_CREATE,    /* create the verbs resources, then rrpc__hs_created */
  RRPC_HS_SEND,      /* send ep->hs.out over TCP, then state = next */
  RRPC_HS_CONNECT,   /* bring the QP up with ep->peer, then rrpc__hs_connected */
  RRPC_HS_ESTABLISH, /* RDMA is up (server: after sending the first CDC) */
  RRPC_HS_FALLBACK,  /* go on over TCP: code, send_decline */
  RRPC_HS_FAIL,      /* fail the connection with err */
  RRPC_HS_PLAIN_TCP, /* the client does not speak CLC: hand the fd to TCP */
  RRPC_HS_HANDOVER,  /* the client opened with another dialect's hello: hand it over */
  RRPC_HS_RETRY_TCP, /* the server closed on our Proposal: reconnect over TCP, remember it */
};
struct rrpc__hs_out {
  enum rrpc__hs_do what;
  int arm;              /* > 0: (re)start the deadline as `arm` steps, first */
  rrpc__ep_state next;  /* SEND: the state once sent */
  uint32_t code;        /* FALLBACK: the Decline code; SEND: the one if it fails (0: FAIL) */
  int send_decline;     /* FALLBACK */
  int err;              /* FAIL */
  int first_cdc;        /* ESTABLISH: send the first CDC over RDMA first */
  const struct rrpc__rdma_dialect *dialect; /* HANDOVER: whose hello it was (dialect.h) */
};
/* What the endpoint's verbs resources look like, for the Accept/Confirm. */
struct rrpc__hs_local {
  uint32_t qpn, ring_rkey, ring_size, rq_size;
  uint64_t ring_addr;
};
struct rrpc__hs_out rrpc__hs_start(rrpc__rdma_ep *ep);
/* The TCP fd is readable (or hung up) during the handshake. */
struct rrpc__hs_out rrpc__hs_on_readable(rrpc__rdma_ep *ep);
/* The step's deadline passed. */
struct rrpc__hs_out rrpc__hs_on_deadline(rrpc__rdma_ep *ep);
/* After the handshake: TCP bytes mean a late Decline (server, before any
 * RDMA message from the client) or a protocol error; EOF closes. */
struct rrpc__hs_out rrpc__hs_on_tcp_after_up(rrpc__rdma_ep *ep);
/* The client received the server's first CDC: the QP works both ways. */
struct rrpc__hs_out rrpc__hs_on_first_cdc(rrpc__rdma_ep *ep);
/* Results of CREATE and CONNECT (rc: 0 or the step's negative code). */
struct rrpc__hs_out rrpc__hs_created(rrpc__rdma_ep *ep, int rc, const struct rrpc__hs_local *l);
struct rrpc__hs_out rrpc__hs_connected(rrpc__rdma_ep *ep, int rc, const struct rrpc__hs_local *l);
/* Give back the handshake slot, if held (UP, fallback, close). Any thread. */
void rrpc__hs_slot_release(rrpc__rdma_ep *ep);
/* A slot of --rdma_max_concurrent_handshakes for another dialect's server
 * handshake (brpc_ep.c): 0 or -EBUSY (counted); put gives it back. */
int rrpc__hs_slot_try(int cap);
void rrpc__hs_slot_put(void);
/* endpoint.c: apply what the handshake decided (loop thread): create the
 * verbs resources, connect the QP, send a CLC message, come up, fall back
 * to TCP (a Decline if asked; or fail the socket when fallback is
 * disabled). */
void rrpc__ep_hs_apply(rrpc__rdma_ep *ep, struct rrpc__hs_out o);

/* ---- imm/datapath.c: the imm dialect's data path (dialect_imm.c puts it
 * in the table; nothing outside imm/ calls it) ---------------------------- */
/* The transport's write op. */
int rrpc__dp_write(rrpc__socket *s, rrpc_iobuf *data);
/* The socket's reading goes on: hand it what was held back. Loop thread. */
void rrpc__dp_resume_read(rrpc__rdma_ep *ep);
/* The shared CQs' callbacks (cqs.h): one completion of this endpoint's
 * QP, then, once per poll, what it adds up to. Loop thread. */
void rrpc__dp_on_wc(rrpc__rdma_ep *ep, const struct ibv_wc *wc, int is_send, rrpc_iobuf *drop);
void rrpc__dp_after(rrpc__rdma_ep *ep);
/* Send a CDC (SEND_WITH_IMM, carrying the owed ACK) with conn_flags; under
 * mu. 0 or a negative code. */
int rrpc__dp_send_cdc_locked(rrpc__rdma_ep *ep, uint8_t conn_flags, int solicited);
/* Post the close CDC if one is due and not posted yet (the send queue may
 * have been full). Under mu. */
void rrpc__dp_send_close_locked(rrpc__rdma_ep *ep);
/* The data path's state as one consistent copy (taken under mu), for
 * describe.c and the describe op: they read the window through this only. */
struct rrpc__dp_view {
  uint64_t tx_prod, tx_peer_cons, rx_prod, rx_cons, rx_acked, zc_held, sq_used;
  uint32_t peer_ring_size, window_free, credits, credits_max, rx_owed, rx_held;
  int write_blocked, peer_asked;
  /* The cursor dialect: its CDC flags (mine as last sent, the peer's as
   * last received) and my ring's size, to show cursors as wrap:count. */
  int cursor;
  uint8_t tx_prod_flags, tx_conn_flags, rx_prod_flags, rx_conn_flags;
  uint32_t my_ring_size;
};
void rrpc__dp_view(rrpc__rdma_ep *ep, struct rrpc__dp_view *out);

/* Helpers of datapath.c that elastic_dp.c and the cursor dialect share
 * (registered sends: they know the imm dialect's receive slices; under mu).
 * The dialect-neutral ones are dp.h's. */
/* One plain RDMA WRITE (no immediate, unsignaled unless due) of all of seg. */
int rrpc__dp_post_write_plain(rrpc__rdma_ep *ep, rrpc_iobuf *seg, uint64_t raddr, uint32_t rkey,
                              rrpc_iobuf *drop);
/* One WRITE_WITH_IMM of all of seg to (raddr, rkey). */
int rrpc__dp_post_write(rrpc__rdma_ep *ep, rrpc_iobuf *seg, uint64_t raddr, uint32_t rkey, uint32_t imm,
                        int solicited, rrpc_iobuf *drop);
/* A pure ACK if one is due and nothing else will carry it. */
void rrpc__dp_maybe_ack_locked(rrpc__rdma_ep *ep);

/* ---- elastic_dp.c: the data path over granted pieces ----------------------- */
/* 1 for a block that is a slice of an elastic piece (holds that piece). */
int rrpc__edp_is_piece_slice(const rrpc_block *b);
/* The idle check (--rdma_ring_idle_ms): started when the connection comes
 * up (loop thread), stopped when its verbs resources go (any thread). */
void rrpc__edp_idle_start(rrpc__rdma_ep *ep);
void rrpc__edp_idle_stop(rrpc__rdma_ep *ep);
/* Set up the pieces layer once the QP is connected (qp_connect). */
int rrpc__edp_init(rrpc__rdma_ep *ep);
/* The write op's loop in elastic mode (under mu). */
int rrpc__edp_write_locked(rrpc__rdma_ep *ep, rrpc_iobuf *data, uint32_t max_sge, rrpc_iobuf *drop);
/* A RECV_RDMA_WITH_IMM completion (loop thread, mu not held). */
int rrpc__edp_on_data(rrpc__rdma_ep *ep, const struct ibv_wc *wc, int *got);
/* A SEND completion whose slot holds an elastic control message (or a
 * CDC: 0 and *is_ctl 0). Applies the immediate. Loop thread, mu not held. */
int rrpc__edp_on_send(rrpc__rdma_ep *ep, const struct ibv_wc *wc, const uint8_t *slot, int *is_ctl);
/* Post what the pieces layer wants posted now (grants, retires). Under mu. */
void rrpc__edp_pump_locked(rrpc__rdma_ep *ep);
/* The immediate of a pure ACK (CDC): credits and returns. Under mu. */
uint32_t rrpc__edp_ack_imm_locked(rrpc__rdma_ep *ep);
/* Whether returns justify a pure ACK now. Under mu. */
int rrpc__edp_ack_due_locked(const rrpc__rdma_ep *ep);
/* Held bytes go up (reading resumed). Loop thread. */
int rrpc__edp_resume_read(rrpc__rdma_ep *ep);
/* Window teardown before the QP goes (any thread; takes mu), and the
 * pieces' memory at the end (ep_free). */
void rrpc__edp_unbind_all(rrpc__rdma_ep *ep);
void rrpc__edp_free_all(rrpc__rdma_ep *ep);

/* ---- describe.c --------------------------------------------------------- */
/* The transport's facts op (QPN, rings, window, credits). Loop thread. */
void rrpc__rdma_conn_facts(const rrpc__socket *s, rrpc__conn_facts *out);
/* A server closed the connection on a client's first handshake bytes (CLC
 * Proposal or brpc hello) without a byte of answer: remember it as TCP-only
 * for `ttl_s` and count the fallback. Both dialects; loop thread. */
void rrpc__rdma_note_closed_on_handshake(rrpc__socket *s, int ttl_s);

#endif /* RRPC_TRANSPORT_RDMA_ENDPOINT_H */
