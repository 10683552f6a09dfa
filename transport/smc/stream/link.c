// transport/smc/stream/link.c - the link: device, verbs objects, sends, receives and the LLC / CDC dispatch.
#include "transport/smc/stream/stream.h"
#include "rrpc/internal/log.h"

#include <errno.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int64_t rrpc__ss_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int rrpc__ss_io_full(int fd, void *buf, size_t len, int is_write) {
  uint8_t *p = buf;
  while (len > 0) {
    ssize_t n = is_write ? write(fd, p, len) : read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return -ECONNRESET;
    if (n < 0) return -errno;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int rrpc__ss_read_gid(const char *dev, uint8_t port, int idx, uint8_t gid[16]) {
  char path[256], text[64];
  snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%u/gids/%d", dev, port, idx);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -errno;
  int ok = fgets(text, sizeof text, f) != NULL;
  fclose(f);
  unsigned v[8];
  if (!ok || sscanf(text, "%x:%x:%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                    &v[6], &v[7]) != 8)
    return -EINVAL;
  for (int i = 0; i < 8; i++) {
    gid[2 * i] = (uint8_t)(v[i] >> 8);
    gid[2 * i + 1] = (uint8_t)v[i];
  }
  return 0;
}

int rrpc__ss_read_mac(const char *netdev, uint8_t mac[6]) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return -errno;
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", netdev);
  int rc = ioctl(fd, SIOCGIFHWADDR, &ifr) == 0 ? 0 : -errno;
  close(fd);
  if (rc == 0) memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
  return rc;
}

// ---- verbs objects ---------------------------------------------------------------------

struct ibv_mr *rrpc__ss_alloc_mr(struct rrpc_smc_stream *s, uint8_t **buf, size_t len, int access) {
  *buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
  if (*buf == NULL) return NULL;
  memset(*buf, 0, len);
  return ibv_reg_mr(s->pd, *buf, len, access);
}

static int open_device(struct rrpc_smc_stream *s, const char *name) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (list == NULL) return -ENODEV;
  for (int i = 0; i < n && s->ctx == NULL; i++)
    if (strcmp(ibv_get_device_name(list[i]), name) == 0) s->ctx = ibv_open_device(list[i]);
  ibv_free_device_list(list);
  return s->ctx != NULL ? 0 : -ENODEV;
}

// Everything but the staging buffer (its size is the peer's RMB, known from its Accept or
// Confirm: rrpc__ss_set_peer).
int rrpc__ss_create_objects(struct rrpc_smc_stream *s, const struct rrpc_smc_stream_opts *o) {
  int rc = open_device(s, o->ibdev);
  if (rc != 0) return rc;
  s->pd = ibv_alloc_pd(s->ctx);
  s->ch = s->pd ? ibv_create_comp_channel(s->ctx) : NULL;
  s->cq = s->ch ? ibv_create_cq(s->ctx, CQ_DEPTH, NULL, s->ch, 0) : NULL;
  if (s->cq == NULL) return -ENOMEM;
  s->ring_code = o->ring_code;
  s->token = KS_TOKEN;
  s->rmb_mr = rrpc__ss_alloc_mr(s, &s->rmb, (uint32_t)RRPC_CLC_RING_MIN << o->ring_code,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  s->recv_mr = rrpc__ss_alloc_mr(s, &s->recv, (size_t)RECV_SLOTS * RECV_SLOT_LEN, IBV_ACCESS_LOCAL_WRITE);
  s->msgs_mr = rrpc__ss_alloc_mr(s, &s->msgs, (size_t)SQ_DEPTH * MSG_SLOT_LEN, 0);
  if (!s->rmb_mr || !s->recv_mr || !s->msgs_mr) return -ENOMEM;
  struct ibv_qp_init_attr qa = {
      .send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = SQ_DEPTH, .max_recv_wr = RECV_SLOTS, .max_send_sge = 1,
              .max_recv_sge = 1}};
  s->qp = ibv_create_qp(s->pd, &qa);
  if (s->qp == NULL) return -errno ? -errno : -ENOMEM;
  s->self.qpn = s->qp->qp_num;
  s->st.my_qpn = s->qp->qp_num;
  return 0;
}

// The peer's RMB element (from its Accept or Confirm): where and how the data goes.
int rrpc__ss_set_peer(struct rrpc_smc_stream *s, const struct rrpc__clc_accept *a) {
  if (a->ring_code > RRPC_CLC_RING_CODE_MAX_LINUX || a->rmbe_idx == 0) return -EPROTO;
  uint32_t peer_ring = (uint32_t)RRPC_CLC_RING_MIN << a->ring_code;
  s->peer_token = a->token;
  s->peer_rkey = a->rkey;
  s->peer_addr = a->ring_addr + (uint64_t)(a->rmbe_idx - 1) * peer_ring;
  s->st.kernel_qpn = a->qpn;
  s->staging_mr = rrpc__ss_alloc_mr(s, &s->staging, peer_ring, 0);
  if (s->staging_mr == NULL) return -ENOMEM;
  return rrpc__cur_init(&s->w, peer_ring, (uint32_t)RRPC_CLC_RING_MIN << s->ring_code, s->token);
}

static int post_recv(struct rrpc_smc_stream *s, uint32_t slot) {
  struct ibv_sge sge = {.addr = (uintptr_t)(s->recv + (size_t)slot * RECV_SLOT_LEN),
                        .length = RECV_SLOT_LEN, .lkey = s->recv_mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = RRPC__SS_WR_RECV | slot, .sg_list = &sge, .num_sge = 1}, *bad;
  return ibv_post_recv(s->qp, &wr, &bad) == 0 ? 0 : -EIO;
}

// INIT -> RTR against the kernel's QP (its QPN, PSN and RoCEv2 GID from the Accept) -> RTS.
int rrpc__ss_bring_up(struct rrpc_smc_stream *s, int gid_index, const struct rrpc__clc_accept *a,
                    uint32_t my_psn) {
  struct ibv_qp_attr at = {.qp_state = IBV_QPS_INIT, .port_num = s->port, .pkey_index = 0,
                           .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
  if (ibv_modify_qp(s->qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return -errno;
  for (uint32_t i = 0; i < RECV_SLOTS; i++)
    if (post_recv(s, i) != 0) return -EIO;
  memset(&at, 0, sizeof at);
  at.qp_state = IBV_QPS_RTR;
  at.path_mtu = (enum ibv_mtu)a->mtu;
  at.dest_qp_num = a->qpn;
  at.rq_psn = a->psn;
  at.max_dest_rd_atomic = 1;
  at.min_rnr_timer = 5; // the kernel's SMC_QP_MIN_RNR_TIMER
  at.ah_attr.is_global = 1;
  at.ah_attr.port_num = s->port;
  at.ah_attr.grh.sgid_index = (uint8_t)gid_index;
  at.ah_attr.grh.hop_limit = 64;
  memcpy(at.ah_attr.grh.dgid.raw, a->gid, 16);
  if (ibv_modify_qp(s->qp, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                    IBV_QP_MIN_RNR_TIMER))
    return -errno;
  memset(&at, 0, sizeof at);
  at.qp_state = IBV_QPS_RTS;
  at.timeout = 15; // the kernel's SMC_QP_TIMEOUT, retry counts as its
  at.retry_cnt = 7;
  at.rnr_retry = 7;
  at.sq_psn = my_psn;
  at.max_rd_atomic = 1;
  if (ibv_modify_qp(s->qp, &at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
    return -errno;
  return 0;
}

void rrpc__ss_destroy(struct rrpc_smc_stream *s) {
  if (s->qp) ibv_destroy_qp(s->qp);
  struct ibv_mr *mrs[] = {s->rmb_mr, s->staging_mr, s->recv_mr, s->msgs_mr};
  for (size_t i = 0; i < sizeof mrs / sizeof mrs[0]; i++)
    if (mrs[i]) ibv_dereg_mr(mrs[i]);
  if (s->cq) ibv_destroy_cq(s->cq);
  if (s->ch) ibv_destroy_comp_channel(s->ch);
  if (s->pd) ibv_dealloc_pd(s->pd);
  if (s->ctx) ibv_close_device(s->ctx);
  free(s->rmb);
  free(s->staging);
  free(s->recv);
  free(s->msgs);
  free(s);
}

// ---- sends -----------------------------------------------------------------------------

static int post_msg(struct rrpc_smc_stream *s, const uint8_t *msg, size_t len) {
  if (s->qp_error || s->sends_out >= SQ_DEPTH) return -EAGAIN;
  uint8_t *slot = s->msgs + (size_t)(s->send_count % SQ_DEPTH) * MSG_SLOT_LEN;
  memcpy(slot, msg, len);
  struct ibv_sge sge = {.addr = (uintptr_t)slot, .length = (uint32_t)len, .lkey = s->msgs_mr->lkey};
  // Solicited, as the kernel sends: its receive CQ is armed for solicited events.
  struct ibv_send_wr wr = {.wr_id = s->send_count, .sg_list = &sge, .num_sge = 1,
                           .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED}, *bad;
  if (ibv_post_send(s->qp, &wr, &bad) != 0) return -EIO;
  s->send_count++;
  s->sends_out++;
  return 0;
}

int rrpc__ss_send_llc(struct rrpc_smc_stream *s, const struct rrpc__llc_msg *m) {
  uint8_t buf[RRPC_LLC_V2_MAX_LEN];
  size_t len = 0;
  int rc = rrpc__llc_encode(m, buf, sizeof buf, &len);
  if (rc == 0 && len > MSG_SLOT_LEN) rc = -EMSGSIZE;
  return rc != 0 ? rc : post_msg(s, buf, len);
}

int rrpc__ss_send_cdc(struct rrpc_smc_stream *s, uint8_t conn_flags) {
  struct rrpc__cur_window saved = s->w;
  struct rrpc__cdc_msg m;
  uint8_t buf[RRPC_CDC_LEN];
  // The connection-state flags stay set in every later CDC, as the kernel keeps them: each CDC
  // replaces the receiver's view of them.
  rrpc__cur_make_cdc(&s->w, s->peer_token, (uint8_t)(conn_flags | s->tx_conn_flags), &m);
  rrpc__cdc_encode(&m, buf);
  int rc = post_msg(s, buf, sizeof buf);
  if (rc != 0) s->w = saved; // not sent: the same sequence number next time
  else s->st.cdc_tx++;
  return rc;
}

// ---- receives --------------------------------------------------------------------------

void rrpc__ss_on_llc(struct rrpc_smc_stream *s, const uint8_t *b, size_t len) {
  struct rrpc__llc_msg req, ans;
  int send = 0;
  if (rrpc__llc_decode(b, len, &req) != 0) {
    RRPC_LOG(WARNING, "smc stream: undecodable LLC message type 0x%02x len %zu", b[0], len);
    return;
  }
  if (!(req.flags & RRPC_LLC_FLAG_RESP)) s->st.llc_rx[req.type & 15]++;
  if (s->is_server && req.type == RRPC_LLC_CONFIRM_LINK && (req.flags & RRPC_LLC_FLAG_RESP)) {
    s->confirmed = 1; // the client's answer to our request
    return;
  }
  enum rrpc__llc_outcome out = rrpc__llc_answer(&s->self, &req, &ans, &send);
  if (send && rrpc__ss_send_llc(s, &ans) != 0) RRPC_LOG(WARNING, "smc stream: LLC answer not sent");
  if (out == RRPC_LLC_CONFIRMED) {
    s->confirmed = 1;
    s->link_num = req.u.confirm_link.link_num;
  }
  if (out == RRPC_LLC_LINK_DOWN) s->link_down = 1;
}

static void on_cdc(struct rrpc_smc_stream *s, const uint8_t *b, size_t len) {
  struct rrpc__cdc_msg m;
  struct rrpc__cur_event ev;
  enum rrpc__cur_violation why;
  if (rrpc__cdc_decode(b, len, &m) == 0 && m.token != s->token) {
    RRPC_LOG(WARNING, "smc stream: CDC for token 0x%08x (not ours: 0x%08x) dropped", m.token, s->token);
    return;
  }
  if (rrpc__cdc_decode(b, len, &m) != 0 || rrpc__cur_on_cdc(&s->w, &m, &ev, &why) != 0) {
    RRPC_LOG(WARNING, "smc stream: CDC refused (%s)", rrpc__cur_violation_text(why));
    s->link_down = 1;
    return;
  }
  s->st.cdc_rx++;
}

static void on_completion(struct rrpc_smc_stream *s, const struct ibv_wc *wc) {
  if (wc->status != IBV_WC_SUCCESS) {
    if (!s->qp_error)
      RRPC_LOG(WARNING, "smc stream: completion %s (wr %llx)", ibv_wc_status_str(wc->status),
              (unsigned long long)wc->wr_id);
    s->qp_error = 1;
    if (!(wc->wr_id & RRPC__SS_WR_RECV) && s->sends_out > 0) s->sends_out--;
    return;
  }
  if (!(wc->wr_id & RRPC__SS_WR_RECV)) {
    s->sends_out--;
    return;
  }
  uint32_t slot = (uint32_t)(wc->wr_id & ~RRPC__SS_WR_RECV);
  const uint8_t *b = s->recv + (size_t)slot * RECV_SLOT_LEN;
  if (wc->byte_len > 0 && rrpc__llc_is_llc(b[0])) rrpc__ss_on_llc(s, b, wc->byte_len);
  else on_cdc(s, b, wc->byte_len);
  if (post_recv(s, slot) != 0) s->qp_error = 1;
}

// Handles every completion there is; when none, waits for the CQ event up to wait_ms.
// 0, or -ETIMEDOUT when nothing happened within wait_ms.
int rrpc__ss_progress(struct rrpc_smc_stream *s, int wait_ms) {
  struct ibv_wc wc[16];
  for (int armed = 0;;) {
    int n = ibv_poll_cq(s->cq, 16, wc);
    if (n < 0) return -EIO;
    for (int i = 0; i < n; i++) on_completion(s, &wc[i]);
    if (n > 0) return 0;
    if (armed) break;
    // Arm, then poll once more: a completion between the poll and the arming is not lost.
    if (ibv_req_notify_cq(s->cq, 0) != 0) return -EIO;
    armed = 1;
  }
  struct pollfd p = {.fd = s->ch->fd, .events = POLLIN};
  int r = poll(&p, 1, wait_ms);
  if (r <= 0) return r == 0 ? -ETIMEDOUT : -errno;
  struct ibv_cq *cq;
  void *ctx;
  if (ibv_get_cq_event(s->ch, &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
  return 0;
}

int rrpc__ss_link_ok(const struct rrpc_smc_stream *s) { return !s->qp_error && !s->link_down; }

