/* transport/rdma/device.h - private to the RDMA transport: the process-wide
 * RDMA runtime - options, the opened device (context, PD, port), GID choice,
 * and routing of the device's async events to the endpoint owning a QP. */
#ifndef RRPC_TRANSPORT_RDMA_DEVICE_H
#define RRPC_TRANSPORT_RDMA_DEVICE_H

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include "rrpc/rdma.h"

/* C++ (the RDMA tests) includes this header too. */
#ifdef __cplusplus
extern "C" {
#endif

typedef struct rrpc__rdma_dev {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  uint8_t port;
  uint8_t link_layer;     /* IBV_LINK_LAYER_ETHERNET (RoCE) or _INFINIBAND */
  enum ibv_mtu active_mtu;
  uint16_t lid;
  uint32_t max_inline;    /* inline bytes a data QP (RRPC_RDMA_SEND_SGE SGEs) gets; 0 if none */
  int max_sge;
  int max_cqe;            /* entries a CQ may have (shared CQs grow up to it) */
  int mw_type2;           /* type-2 memory windows: rings are bound to one QP */
  int rx_events_all;      /* arm receive CQs for every completion, not solicited ones only
                             (Soft-iWARP: see device.c) */
  char name[64];
  uint8_t mac[6];         /* of the RoCE netdev (for CLC), zero if unknown */
} rrpc__rdma_dev;

/* The SGE list of a data QP's send WRs (at most; less where the device has
 * fewer): one WRITE gathers up to this many iobuf pieces. */
#define RRPC_RDMA_SEND_SGE 16
/* rrpc__rdma_send_sge - what a data QP of d asks for: RRPC_RDMA_SEND_SGE,
 * or the device's max_sge if that is smaller. */
static inline uint32_t rrpc__rdma_send_sge(const rrpc__rdma_dev *d) {
  return d->max_sge < RRPC_RDMA_SEND_SGE ? (uint32_t)d->max_sge : RRPC_RDMA_SEND_SGE;
}

/* rrpc__rdma_options - the effective global options (defaults applied).
 * The first call freezes them (rrpc_rdma_global_init after that returns
 * -EALREADY). Never NULL. Thread-safe. */
const rrpc_rdma_options *rrpc__rdma_options(void);

/* rrpc__rdma_dev_get - the device, opened on first use (by --rdma_device
 * name, or the first with an ACTIVE --rdma_port). -RRPC_ENODEV when there
 * is none or the port is down (checked again on each call while not open,
 * and the port state is re-queried at most once a second after opening so a
 * port that went down is reported; PORT_ERR/PORT_ACTIVE events update it at
 * once; after DEVICE_FATAL it stays -RRPC_ENODEV). Other codes as for
 * rrpc__rdma_dev_open. The device lives until exit (never closed). No
 * exit() on any failure. Thread-safe. */
int rrpc__rdma_dev_get(rrpc__rdma_dev **out);

/* rrpc__rdma_dev_open - open device `name` (NULL or "": the first device
 * whose port `port` is ACTIVE) on its own, outside the process-wide one:
 * context, PD, port facts, max_inline, MAC, GID table, async-event watcher
 * on a loop of the global loop group. rrpc__rdma_dev_get uses it once with
 * the global options; tests use it directly. 0, -RRPC_ENODEV (no such
 * device, port down or absent), -RRPC_ERDMA (a verbs call failed), -ENOMEM
 * or the loop's error. Blocks (verbs queries); thread-safe. */
int rrpc__rdma_dev_open(const char *name, int port, rrpc__rdma_dev **out);
/* rrpc__rdma_dev_close - undo rrpc__rdma_dev_open: the async watcher is gone
 * (and not running) when it returns. Every QP watch and every MR/QP/CQ on
 * the PD must be gone first. Never on the process-wide device (it lives
 * until exit: pool regions are registered on its PD). Not on a loop thread. */
void rrpc__rdma_dev_close(rrpc__rdma_dev *d);

/* rrpc__rdma_dev_pick_gid - the GID for a connection whose TCP local address
 * is `local`: --rdma_gid_index if set; else on RoCE the RoCE v2 GID whose
 * IPv4-mapped address equals local's IPv4 address, then any RoCE v2 GID,
 * then RoCE v1; on IB index 0. 0 or -RRPC_ENODEV (no usable GID). The table
 * is cached and re-read after a GID_CHANGE event. Thread-safe. */
int rrpc__rdma_dev_pick_gid(rrpc__rdma_dev *d, const struct sockaddr_storage *local, int *gid_index,
                            union ibv_gid *gid);
/* rrpc__rdma_dev_gid_mac - the MAC of the netdev behind GID `gid_index` (a
 * GID on a VLAN or macvlan netdev has that netdev's MAC, not d->mac), for
 * the CLC messages. 0, -ENOENT (no such GID or no netdev, e.g. on IB) or
 * -errno of the ioctl. Thread-safe. */
int rrpc__rdma_dev_gid_mac(rrpc__rdma_dev *d, int gid_index, uint8_t mac[6]);

/* Async events (QP fatal, port down, ...): the endpoint that owns a QP
 * registers a callback under its qp_num; the device's async-event watcher
 * (on a loop thread) calls it with the event type. Unregister before
 * destroying the QP: after unregister returns, cb is not running and will
 * not run. Port events (and DEVICE_FATAL) go to every registered callback.
 * Each event is acked before any callback runs, so a callback (or anyone)
 * may destroy the QP without waiting on the ack.
 * Callbacks run one at a time, on the watcher's loop thread, under a
 * dispatch lock: unwatch from another thread waits for a running callback,
 * so never call unwatch while holding a lock that the callback takes.
 * Unwatch from inside a callback (any entry) does not wait.
 * watch: 0, -EEXIST (qp_num already watched), -EINVAL (cb NULL) or -ENOMEM.
 * `arg` is borrowed until unwatch returns. Thread-safe. */
typedef void (*rrpc__rdma_async_cb)(void *arg, enum ibv_event_type ev);
int rrpc__rdma_dev_watch_qp(rrpc__rdma_dev *d, uint32_t qp_num, rrpc__rdma_async_cb cb, void *arg);
void rrpc__rdma_dev_unwatch_qp(rrpc__rdma_dev *d, uint32_t qp_num);

/* Process-wide counters behind rrpc_rdma_get_stats (relaxed atomics). */
typedef enum rrpc__rdma_counter {
  RRPC_RDMA_CNT_CONN_RDMA,
  RRPC_RDMA_CNT_CONN_FALLBACK,
  RRPC_RDMA_CNT_BYTES_WRITTEN,
  RRPC_RDMA_CNT_BYTES_RECEIVED,
  RRPC_RDMA_CNT_WRITES,
  RRPC_RDMA_CNT_CDC_SENT,
  RRPC_RDMA_CNT_COMPLETIONS,
  RRPC_RDMA_CNT_WAKEUPS,
  RRPC_RDMA_CNT_SOLICITED,
  RRPC_RDMA_CNT_BLOCKED,
  RRPC_RDMA_CNT_HS_REFUSED,
  RRPC_RDMA_CNT_PROTO_VIOLATION,
  RRPC_RDMA_CNT_CLOSE_UNCONFIRMED,
  RRPC_RDMA_CNT_OVER_REGISTERED_CAP,
  RRPC_RDMA_CNT_COPIED_SEND, /* payload bytes the CPU copied to send them */
  RRPC_RDMA_CNT_COPIED_RECV, /* payload bytes copied out of receive memory */
  /* Gauges (registered bytes now; a release adds the two's complement). */
  RRPC_RDMA_CNT_RING_BYTES,
  RRPC_RDMA_CNT_SLOT_BYTES,
  RRPC_RDMA_CNT_CONN_ELASTIC,
  RRPC_RDMA_CNT_PIECE_GRANTS,
  RRPC_RDMA_CNT_PIECE_RETIRES_HELD,
  RRPC_RDMA_CNT_PIECE_RETIRES_SHRINK,
  RRPC_RDMA_CNT_PIECE_HANDBACKS,
  RRPC_RDMA_CNT_PIECE_WANTS,
  RRPC_RDMA_CNT_PIECE_RETIRE_REFUSED,
  RRPC_RDMA_CNT_PIECE_GRANT_REFUSED,
  RRPC_RDMA_CNT_PIECE_TABLE_FULL,
  RRPC_RDMA_CNT_POOL_GROWS_AHEAD,
  RRPC_RDMA_CNT_POOL_GROWS_INLINE,
  RRPC_RDMA_CNT_POOL_GROW_WAITS,
  RRPC_RDMA_CNT_BLOCKED_SQ,
  RRPC_RDMA_CNT_RING_FULL_HELD,
  RRPC_RDMA_CNT_PIECE_BIND_WAITS,
  RRPC_RDMA_CNT_CM_CONNECTS,
  RRPC_RDMA_CNT_CM_ACCEPTS,
  RRPC_RDMA_CNT_CM_FAILURES,
  RRPC_RDMA_CNT_CURSOR_STALLS,
  RRPC_RDMA_CNT_CM_PORT_RETRIES,
  RRPC_RDMA_CNT_CLOSES_AFTER_HELD,
  RRPC_RDMA_CNT__COUNT
} rrpc__rdma_counter;
void rrpc__rdma_count(rrpc__rdma_counter c, uint64_t n);
/* Record a fallback and its SMC decline code (for stats and a log line). */
void rrpc__rdma_note_fallback(uint32_t decline_code);
/* Server handshakes holding verbs resources now (handshake.c). */
uint64_t rrpc__rdma_hs_in_progress(void);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_DEVICE_H */
