// transport/smc/stream/stream.h - internals of rrpc/smc_stream.h shared by its files:
// link.c (verbs objects, sends, receives, LLC dispatch), connect.c (the client's CLC),
// accept.c (the server's CLC and its kept link), io.c (read, write, close), config.c.
#ifndef RRPC_TRANSPORT_SMC_STREAM_STREAM_H
#define RRPC_TRANSPORT_SMC_STREAM_STREAM_H

#include <infiniband/verbs.h>
#include <stdint.h>

#include "rrpc/smc_stream.h"
#include "transport/rdma/wire/cursor_window.h"
#include "transport/smc/cdc.h"
#include "transport/smc/clc.h"
#include "transport/smc/llc.h"
#include "transport/smc/llc_answer.h"
#include "transport/smc/smc_config.h"

enum {
  RECV_SLOTS = 16,                 // receives posted on the link (LLC + CDC)
  RECV_SLOT_LEN = RRPC_LLC_V2_MAX_LEN,
  SQ_DEPTH = 128,
  MSG_SLOT_LEN = 64,               // one CDC or LLC message
  CQ_DEPTH = SQ_DEPTH + RECV_SLOTS + 16,
  KS_TOKEN = 0x52525043,           // my first alert token ("RRPC"); +1 per reused link
};

// wr_id tag of receives (the slot in the low bits); sends carry their counter, WRITEs RRPC__SS_WR_WRITE.
#define RRPC__SS_WR_RECV (1ull << 63)
#define RRPC__SS_WR_WRITE (1ull << 62)

struct rrpc_smc_stream {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_comp_channel *ch;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  uint8_t *rmb, *staging, *recv, *msgs; // my RMB, a mirror of the peer's, receives, SEND bodies
  struct ibv_mr *rmb_mr, *staging_mr, *recv_mr, *msgs_mr;
  struct rrpc__cur_window w;
  struct rrpc__llc_self self;
  uint32_t peer_token, peer_rkey;
  uint64_t peer_addr;
  unsigned sends_out;   // posted sends not yet completed
  uint64_t send_count;  // SEND bodies used (slot = count % SQ_DEPTH)
  int confirmed, link_down, qp_error;
  uint8_t link_num; // from the kernel's CONFIRM_LINK
  uint8_t ring_code;
  int is_server;
  unsigned test_links_wanted;
  uint32_t token;            // my alert token of the current connection
  uint8_t client_sysid[8];   // server: the kernel client's system ID (link reuse matches it)
  uint8_t client_gid[16];
  int timeout_ms;
  uint8_t tx_conn_flags;     // RRPC_CDC_CS_* every CDC I send carries (done writing after _shutdown)
  uint8_t port;              // the RDMA port: 1, or the pnet entry's
  struct rrpc_smc_stream_stats st;
};

// ---- shared between the files of transport/smc/stream/ --------------------------------

// The process-wide smc_config when the caller set no ibdev / UEIDs (docs/kernel-smc.md).
int rrpc__ss_resolve(const struct rrpc_smc_stream_opts *o, struct rrpc_smc_stream_opts *r,
                     uint8_t *port);
int rrpc__ss_ueids(const struct rrpc_smc_stream_opts *o, struct rrpc__smc_config *cfg);

// link.c: device, verbs objects, sends, receives.
int64_t rrpc__ss_now_ms(void);
int rrpc__ss_io_full(int fd, void *buf, size_t len, int is_write);
int rrpc__ss_read_gid(const char *dev, uint8_t port, int idx, uint8_t gid[16]);
int rrpc__ss_read_mac(const char *netdev, uint8_t mac[6]);
struct ibv_mr *rrpc__ss_alloc_mr(struct rrpc_smc_stream *s, uint8_t **buf, size_t len, int access);
int rrpc__ss_create_objects(struct rrpc_smc_stream *s, const struct rrpc_smc_stream_opts *o);
int rrpc__ss_set_peer(struct rrpc_smc_stream *s, const struct rrpc__clc_accept *a);
int rrpc__ss_bring_up(struct rrpc_smc_stream *s, int gid_index, const struct rrpc__clc_accept *a,
                      uint32_t my_psn);
void rrpc__ss_destroy(struct rrpc_smc_stream *s);
int rrpc__ss_send_llc(struct rrpc_smc_stream *s, const struct rrpc__llc_msg *m);
int rrpc__ss_send_cdc(struct rrpc_smc_stream *s, uint8_t conn_flags);
void rrpc__ss_on_llc(struct rrpc_smc_stream *s, const uint8_t *b, size_t len);
int rrpc__ss_progress(struct rrpc_smc_stream *s, int wait_ms);
int rrpc__ss_link_ok(const struct rrpc_smc_stream *s);

// connect.c: CLC pieces the server half shares.
int rrpc__ss_read_clc(int fd, struct rrpc__clc_msg *m);
void rrpc__ss_fill_first_contact(const struct rrpc_smc_stream *s, const uint8_t peer_id[8],
                                 uint8_t mtu, uint32_t my_psn, struct rrpc__clc_accept *c);
uint32_t rrpc__ss_random_psn(void);
int rrpc__ss_await_confirm_link(struct rrpc_smc_stream *s);

// accept.c: the server's link kept for the same kernel client's next connection.
extern struct rrpc_smc_stream *rrpc__ss_parked;

// io.c: DELETE_LINK and the verbs objects freed.
void rrpc__ss_end_link(struct rrpc_smc_stream *s);

#endif
