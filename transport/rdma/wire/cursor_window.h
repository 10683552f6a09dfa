/* wire/cursor_window.h - private to the RDMA transport: the cursor dialect's
 * flow control (SMC-R as Linux speaks it), as pure logic over integers (no
 * verbs). The sender RDMA-WRITEs (no immediate) into the peer's RMB ring
 * at its producer cursor, then sends one 44-byte CDC carrying that cursor;
 * the receiver consumes and tells its consumer cursor back by CDC. Cursors
 * travel as {wrap, count} (transport/smc/cdc.h) and are kept here as 64-bit
 * stream offsets: a cursor that does not map to an offset a correct peer
 * could send is a protocol violation, never trusted.
 *
 * What is checked on every received CDC (rrpc__cur_on_cdc), all or nothing:
 * - the token is ours (a CDC for another connection is refused);
 * - nothing arrives after the peer said closed or abnormal close;
 * - the sequence number is newer than the last (an older one is dropped,
 *   as Linux does; the same one twice is dropped too);
 * - the producer cursor moves forward by at most the free room of my ring
 *   (ahead of what was consumed by no more than the ring size): a peer
 *   that claims more than it could have written, or wraps wrongly, lands
 *   outside and is refused; going backwards is refused;
 * - the consumer cursor moves forward and never past what I wrote.
 *
 * When to send a consumer-cursor update (rrpc__cur_update_due) follows the
 * kernel's smc_tx_consumer_update: when the peer asked (producer flag
 * 0x10), or when the unconfirmed consumed bytes exceed max(ring/10, 2 KiB)
 * and either the peer's view of its free room is at most half my ring or
 * the peer said it is blocked. That rule, not a CDC per read: it is what a
 * kernel peer paces itself by, and it keeps small reads from costing a
 * CDC each while a blocked or half-starved sender is always answered. Once
 * everything was consumed the unconfirmed bytes are the peer's whole use
 * of the ring, so a blocked sender is never left waiting on a ring larger
 * than twice the limit (rings are 16 KiB or more).
 *
 * Thread safety: none; a window belongs to its endpoint, which serializes
 * calls. Nothing here blocks or allocates. */
#ifndef RRPC_TRANSPORT_RDMA_WIRE_CURSOR_WINDOW_H
#define RRPC_TRANSPORT_RDMA_WIRE_CURSOR_WINDOW_H

#include <stdint.h>

#include "transport/smc/cdc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The floor of the consumer-update threshold (the kernel's SOCK_MIN_SNDBUF
 * / 2, rounded). */
enum { RRPC_CUR_UPDATE_MIN = 2048 };

struct rrpc__cur_window {
  /* Sending: my view of the peer's RMB. */
  uint32_t tx_ring;      /* the peer's RMB size (its Accept/Confirm) */
  uint64_t tx_prod;      /* bytes written into it */
  uint64_t tx_peer_cons; /* bytes the peer consumed, from its CDCs */
  uint16_t tx_seq;       /* last CDC sequence number sent (first = 1) */
  uint8_t tx_flags;      /* producer flags of the next CDC (write blocked) */
  /* Receiving: my RMB. */
  uint32_t rx_ring;       /* my RMB size */
  uint32_t token;         /* my alert token: every CDC to me carries it */
  uint64_t rx_prod;       /* bytes the peer wrote, from its CDCs */
  uint64_t rx_cons;       /* bytes consumed (their room is free again) */
  uint64_t rx_cons_sent;  /* consumer cursor last told the peer */
  uint16_t rx_seq;        /* last CDC sequence number accepted */
  uint8_t rx_prod_flags;  /* the peer's last producer flags */
  uint8_t rx_conn_flags;  /* the peer's connection state flags, sticky */
};

/* rrpc__cur_init - both rings (bytes, > 0, <= 2^31) and my token. */
int rrpc__cur_init(struct rrpc__cur_window *w, uint32_t tx_ring, uint32_t rx_ring, uint32_t token);

/* ---- sending ---------------------------------------------------------------- */

/* Free room in the peer's ring. */
uint32_t rrpc__cur_tx_free(const struct rrpc__cur_window *w);

/* Where the next `want` bytes go: up to two segments (the free area may
 * wrap), offsets in the peer's ring. Returns the bytes planned (0: full). */
struct rrpc__cur_seg {
  uint32_t off, len;
};
uint32_t rrpc__cur_tx_plan(const struct rrpc__cur_window *w, uint64_t want, struct rrpc__cur_seg seg[2],
                           int *nseg);

/* n bytes were written (after a plan of at least n). */
void rrpc__cur_tx_commit(struct rrpc__cur_window *w, uint32_t n);

/* The CDC to send now: the next sequence number, the peer's token, my
 * producer cursor into its ring and my consumer cursor (which counts as
 * told from now on), the producer flags and conn_flags. */
void rrpc__cur_make_cdc(struct rrpc__cur_window *w, uint32_t peer_token, uint8_t conn_flags,
                        struct rrpc__cdc_msg *out);

/* ---- receiving --------------------------------------------------------------- */

/* What one received CDC meant. */
struct rrpc__cur_event {
  uint32_t new_bytes;  /* written into my ring since the last CDC: [rx_prod - new_bytes, rx_prod) */
  uint32_t freed;      /* room the peer freed in its ring */
  int stale;           /* an old sequence number: dropped, nothing changed */
  uint8_t conn_flags;  /* RRPC_CDC_CS_* newly set by this CDC */
};

/* Why a CDC was refused (rrpc__cur_on_cdc's negative answers, all
 * -RRPC_EPARSE to the caller; `why` says which). */
enum rrpc__cur_violation {
  RRPC_CUR_OK = 0,
  RRPC_CUR_BAD_TOKEN,     /* a CDC for another connection */
  RRPC_CUR_AFTER_CLOSE,   /* after the peer's close */
  RRPC_CUR_BAD_PROD,      /* producer cursor outside [rx_prod, rx_cons + ring] */
  RRPC_CUR_BAD_CONS,      /* consumer cursor outside [tx_peer_cons, tx_prod] */
};
const char *rrpc__cur_violation_text(enum rrpc__cur_violation v);

/* rrpc__cur_on_cdc - apply a decoded CDC: 0 (see *ev) or -RRPC_EPARSE with
 * *why set and the window unchanged. */
int rrpc__cur_on_cdc(struct rrpc__cur_window *w, const struct rrpc__cdc_msg *m, struct rrpc__cur_event *ev,
                     enum rrpc__cur_violation *why);

/* n received bytes were consumed (their room is free). n must not exceed
 * rx_prod - rx_cons. */
void rrpc__cur_rx_consume(struct rrpc__cur_window *w, uint32_t n);

/* 1 if a consumer-cursor update is due now (the kernel's rule, above). */
int rrpc__cur_update_due(const struct rrpc__cur_window *w);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_WIRE_CURSOR_WINDOW_H */
