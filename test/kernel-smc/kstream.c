// test/kernel-smc/kstream.c - the SMC-Rv2 client link and stream of kstream.h: CLC v2
// (transport/smc/clc*.c), one RC QP brought up against the kernel's, the LLC answers of
// transport/smc/llc_answer.c, and the cursor data path (RDMA WRITE into the peer's RMB at its
// producer cursor + one 44-byte CDC SEND), paced by transport/rdma/wire/cursor_window.c, the
// same flow-control rules as rrpc's cursor dialect.
#include "test/kernel-smc/kstream.h"

#include <errno.h>
#include <infiniband/verbs.h>
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

// wr_id tag of receives (the slot in the low bits); sends carry their counter, WRITEs WR_WRITE.
static const uint64_t WR_RECV = 1ull << 63;
static const uint64_t WR_WRITE = 1ull << 62;

struct rrpc_kstream {
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
  struct rrpc_kstream_stats st;
};

// ---- small helpers ---------------------------------------------------------------------

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int io_full(int fd, void *buf, size_t len, int is_write) {
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

static int read_gid(const char *dev, int idx, uint8_t gid[16]) {
  char path[256], text[64];
  snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/1/gids/%d", dev, idx);
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

static int read_mac(const char *netdev, uint8_t mac[6]) {
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

static struct ibv_mr *alloc_mr(struct rrpc_kstream *s, uint8_t **buf, size_t len, int access) {
  *buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
  if (*buf == NULL) return NULL;
  memset(*buf, 0, len);
  return ibv_reg_mr(s->pd, *buf, len, access);
}

static int open_device(struct rrpc_kstream *s, const char *name) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (list == NULL) return -ENODEV;
  for (int i = 0; i < n && s->ctx == NULL; i++)
    if (strcmp(ibv_get_device_name(list[i]), name) == 0) s->ctx = ibv_open_device(list[i]);
  ibv_free_device_list(list);
  return s->ctx != NULL ? 0 : -ENODEV;
}

// Everything but the staging buffer (its size is the peer's RMB, known from its Accept or
// Confirm: set_peer).
static int create_objects(struct rrpc_kstream *s, const struct rrpc_kstream_opts *o) {
  int rc = open_device(s, o->ibdev);
  if (rc != 0) return rc;
  s->pd = ibv_alloc_pd(s->ctx);
  s->ch = s->pd ? ibv_create_comp_channel(s->ctx) : NULL;
  s->cq = s->ch ? ibv_create_cq(s->ctx, CQ_DEPTH, NULL, s->ch, 0) : NULL;
  if (s->cq == NULL) return -ENOMEM;
  s->ring_code = o->ring_code;
  s->token = KS_TOKEN;
  s->rmb_mr = alloc_mr(s, &s->rmb, (uint32_t)RRPC_CLC_RING_MIN << o->ring_code,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  s->recv_mr = alloc_mr(s, &s->recv, (size_t)RECV_SLOTS * RECV_SLOT_LEN, IBV_ACCESS_LOCAL_WRITE);
  s->msgs_mr = alloc_mr(s, &s->msgs, (size_t)SQ_DEPTH * MSG_SLOT_LEN, 0);
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
static int set_peer(struct rrpc_kstream *s, const struct rrpc__clc_accept *a) {
  if (a->ring_code > RRPC_CLC_RING_CODE_MAX_LINUX || a->rmbe_idx == 0) return -EPROTO;
  uint32_t peer_ring = (uint32_t)RRPC_CLC_RING_MIN << a->ring_code;
  s->peer_token = a->token;
  s->peer_rkey = a->rkey;
  s->peer_addr = a->ring_addr + (uint64_t)(a->rmbe_idx - 1) * peer_ring;
  s->st.kernel_qpn = a->qpn;
  s->staging_mr = alloc_mr(s, &s->staging, peer_ring, 0);
  if (s->staging_mr == NULL) return -ENOMEM;
  return rrpc__cur_init(&s->w, peer_ring, (uint32_t)RRPC_CLC_RING_MIN << s->ring_code, s->token);
}

static int post_recv(struct rrpc_kstream *s, uint32_t slot) {
  struct ibv_sge sge = {.addr = (uintptr_t)(s->recv + (size_t)slot * RECV_SLOT_LEN),
                        .length = RECV_SLOT_LEN, .lkey = s->recv_mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = WR_RECV | slot, .sg_list = &sge, .num_sge = 1}, *bad;
  return ibv_post_recv(s->qp, &wr, &bad) == 0 ? 0 : -EIO;
}

// INIT -> RTR against the kernel's QP (its QPN, PSN and RoCEv2 GID from the Accept) -> RTS.
static int bring_up(struct rrpc_kstream *s, int gid_index, const struct rrpc__clc_accept *a,
                    uint32_t my_psn) {
  struct ibv_qp_attr at = {.qp_state = IBV_QPS_INIT, .port_num = 1, .pkey_index = 0,
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
  at.ah_attr.port_num = 1;
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

static void destroy(struct rrpc_kstream *s) {
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

static int post_msg(struct rrpc_kstream *s, const uint8_t *msg, size_t len) {
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

static int send_llc(struct rrpc_kstream *s, const struct rrpc__llc_msg *m) {
  uint8_t buf[RRPC_LLC_V2_MAX_LEN];
  size_t len = 0;
  int rc = rrpc__llc_encode(m, buf, sizeof buf, &len);
  if (rc == 0 && len > MSG_SLOT_LEN) rc = -EMSGSIZE;
  return rc != 0 ? rc : post_msg(s, buf, len);
}

static int send_cdc(struct rrpc_kstream *s, uint8_t conn_flags) {
  struct rrpc__cur_window saved = s->w;
  struct rrpc__cdc_msg m;
  uint8_t buf[RRPC_CDC_LEN];
  rrpc__cur_make_cdc(&s->w, s->peer_token, conn_flags, &m);
  rrpc__cdc_encode(&m, buf);
  int rc = post_msg(s, buf, sizeof buf);
  if (rc != 0) s->w = saved; // not sent: the same sequence number next time
  else s->st.cdc_tx++;
  return rc;
}

// ---- receives --------------------------------------------------------------------------

static void on_llc(struct rrpc_kstream *s, const uint8_t *b, size_t len) {
  struct rrpc__llc_msg req, ans;
  int send = 0;
  if (rrpc__llc_decode(b, len, &req) != 0) {
    fprintf(stderr, "kstream: undecodable LLC message type 0x%02x len %zu\n", b[0], len);
    return;
  }
  if (!(req.flags & RRPC_LLC_FLAG_RESP)) s->st.llc_rx[req.type & 15]++;
  if (s->is_server && req.type == RRPC_LLC_CONFIRM_LINK && (req.flags & RRPC_LLC_FLAG_RESP)) {
    s->confirmed = 1; // the client's answer to our request
    return;
  }
  enum rrpc__llc_outcome out = rrpc__llc_answer(&s->self, &req, &ans, &send);
  if (send && send_llc(s, &ans) != 0) fprintf(stderr, "kstream: LLC answer not sent\n");
  if (out == RRPC_LLC_CONFIRMED) {
    s->confirmed = 1;
    s->link_num = req.u.confirm_link.link_num;
  }
  if (out == RRPC_LLC_LINK_DOWN) s->link_down = 1;
}

static void on_cdc(struct rrpc_kstream *s, const uint8_t *b, size_t len) {
  struct rrpc__cdc_msg m;
  struct rrpc__cur_event ev;
  enum rrpc__cur_violation why;
  if (rrpc__cdc_decode(b, len, &m) == 0 && m.token != s->token) {
    fprintf(stderr, "kstream: CDC for token 0x%08x (not ours: 0x%08x) dropped\n", m.token, s->token);
    return;
  }
  if (rrpc__cdc_decode(b, len, &m) != 0 || rrpc__cur_on_cdc(&s->w, &m, &ev, &why) != 0) {
    fprintf(stderr, "kstream: CDC refused (%s)\n", rrpc__cur_violation_text(why));
    s->link_down = 1;
    return;
  }
  s->st.cdc_rx++;
}

static void on_completion(struct rrpc_kstream *s, const struct ibv_wc *wc) {
  if (wc->status != IBV_WC_SUCCESS) {
    if (!s->qp_error)
      fprintf(stderr, "kstream: completion %s (wr %llx)\n", ibv_wc_status_str(wc->status),
              (unsigned long long)wc->wr_id);
    s->qp_error = 1;
    if (!(wc->wr_id & WR_RECV) && s->sends_out > 0) s->sends_out--;
    return;
  }
  if (!(wc->wr_id & WR_RECV)) {
    s->sends_out--;
    return;
  }
  uint32_t slot = (uint32_t)(wc->wr_id & ~WR_RECV);
  const uint8_t *b = s->recv + (size_t)slot * RECV_SLOT_LEN;
  if (wc->byte_len > 0 && rrpc__llc_is_llc(b[0])) on_llc(s, b, wc->byte_len);
  else on_cdc(s, b, wc->byte_len);
  if (post_recv(s, slot) != 0) s->qp_error = 1;
}

// Handles every completion there is; when none, waits for the CQ event up to wait_ms.
// 0, or -ETIMEDOUT when nothing happened within wait_ms.
static int progress(struct rrpc_kstream *s, int wait_ms) {
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

static int link_ok(const struct rrpc_kstream *s) { return !s->qp_error && !s->link_down; }

// ---- CLC -------------------------------------------------------------------------------

static int read_clc(int fd, struct rrpc__clc_msg *m) {
  uint8_t buf[RRPC_CLC_MAX_LEN];
  struct rrpc__clc_hdr h;
  int rc = io_full(fd, buf, RRPC_CLC_HDR_LEN, 0);
  if (rc == 0) rc = rrpc__clc_peek_header(buf, RRPC_CLC_HDR_LEN, &h);
  if (rc == 0) rc = io_full(fd, buf + RRPC_CLC_HDR_LEN, (size_t)h.length - RRPC_CLC_HDR_LEN, 0);
  return rc != 0 ? rc : rrpc__clc_decode(buf, h.length, m);
}

static int send_proposal(int fd, const struct rrpc_kstream_opts *o, const uint8_t peer_id[8],
                         const uint8_t gid[16]) {
  struct rrpc__smc_config cfg;
  const char *why = NULL;
  memset(&cfg, 0, sizeof cfg);
  if (rrpc__smc_parse_ueids(o->ueids, &cfg, &why) != 0) return -EINVAL;
  struct rrpc__clc_proposal p;
  memset(&p, 0, sizeof p);
  memcpy(p.peer_id, peer_id, 8);
  p.has_v2_ext = 1;
  p.v2_release = 1;
  p.max_conns = 255;
  p.max_links = 1; // one link: an ADD_LINK is rejected anyway
  memcpy(p.roce_v2_gid, gid, 16);
  p.eid_count = cfg.ueid_count;
  for (unsigned i = 0; i < cfg.ueid_count; i++) memcpy(p.eids[i], cfg.ueids[i], RRPC_CLC_EID_LEN);
  uint8_t buf[RRPC_CLC_MAX_LEN];
  size_t len = 0;
  int rc = rrpc__clc_encode_proposal_v2(&p, buf, sizeof buf, &len);
  return rc != 0 ? rc : io_full(fd, buf, len, 1);
}

// My half of the first-contact Accept (server) or Confirm (client): this end's QP, RMB and PSN.
static void fill_first_contact(const struct rrpc_kstream *s, const uint8_t peer_id[8],
                               uint8_t mtu, uint32_t my_psn, struct rrpc__clc_accept *c) {
  memset(c, 0, sizeof *c);
  c->first_contact = 1;
  memcpy(c->peer_id, peer_id, 8);
  memcpy(c->gid, s->self.gid, 16);
  memcpy(c->mac, s->self.mac, 6);
  c->qpn = s->qp->qp_num;
  c->rkey = s->rmb_mr->rkey;
  c->rmbe_idx = 1;
  c->token = s->token;
  c->ring_code = s->ring_code;
  c->mtu = mtu;
  c->ring_addr = (uint64_t)(uintptr_t)s->rmb;
  c->psn = my_psn;
  c->has_fce = 1;
  c->os_type = 2;
  memset(c->hostname, ' ', sizeof c->hostname);
  memcpy(c->hostname, "rrpc", 4);
}

static uint32_t random_psn(void) {
  uint32_t psn;
  if (getrandom(&psn, sizeof psn, 0) != sizeof psn) psn = (uint32_t)now_ms();
  return psn & 0xffffff;
}

static int send_confirm(int fd, const struct rrpc_kstream *s, const uint8_t peer_id[8],
                        const struct rrpc__clc_accept *a, uint32_t my_psn) {
  struct rrpc__clc_accept c;
  fill_first_contact(s, peer_id, a->mtu, my_psn, &c);
  c.type = RRPC_CLC_CONFIRM;
  memcpy(c.eid, a->eid, RRPC_CLC_EID_LEN);
  c.v2_direct = a->v2_direct;
  c.release = a->release;
  c.max_conns = a->max_conns;
  c.max_links = a->max_links;
  c.gid_count = 1;
  memcpy(c.gids[0], s->self.gid, 16);
  uint8_t buf[RRPC_CLC_MAX_LEN];
  size_t len = 0;
  int rc = rrpc__clc_encode_accept_v2(&c, buf, sizeof buf, &len);
  return rc != 0 ? rc : io_full(fd, buf, len, 1);
}

// Waits for the kernel's CONFIRM_LINK request (answered in on_llc).
static int await_confirm_link(struct rrpc_kstream *s) {
  int64_t end = now_ms() + s->timeout_ms;
  while (!s->confirmed && link_ok(s)) {
    int left = (int)(end - now_ms());
    if (left <= 0 || progress(s, left) == -ETIMEDOUT) return -ETIMEDOUT;
  }
  return s->confirmed ? 0 : -ECONNRESET;
}

int rrpc_kstream_connect(int fd, const struct rrpc_kstream_opts *o, rrpc_kstream **out,
                         uint32_t *decline) {
  struct rrpc_kstream *s = calloc(1, sizeof *s);
  if (s == NULL) return -ENOMEM;
  s->timeout_ms = o->timeout_ms;
  int rc = read_gid(o->ibdev, o->gid_index, s->self.gid);
  if (rc == 0) rc = read_mac(o->netdev, s->self.mac);
  // The system ID (as Linux builds it: 2 bytes, then the MAC), the 2 bytes from the pid: the
  // kernel matches link groups by it first, so this process gets a link group of its own.
  uint8_t peer_id[8] = {(uint8_t)(getpid() >> 8), (uint8_t)getpid()};
  memcpy(peer_id + 2, s->self.mac, 6);
  if (rc == 0) rc = send_proposal(fd, o, peer_id, s->self.gid);
  struct rrpc__clc_msg m;
  if (rc == 0) rc = read_clc(fd, &m);
  if (rc == 0 && m.hdr.type == RRPC_CLC_DECLINE) {
    *decline = m.u.decline.diag;
    rc = -ECONNREFUSED;
  } else if (rc == 0 && (m.hdr.type != RRPC_CLC_ACCEPT || !m.u.accept.first_contact)) {
    rc = -EPROTO;
  }
  uint32_t my_psn = random_psn();
  if (rc == 0) rc = create_objects(s, o);
  if (rc == 0) rc = set_peer(s, &m.u.accept);
  if (rc == 0) rc = bring_up(s, o->gid_index, &m.u.accept, my_psn);
  if (rc == 0) rc = send_confirm(fd, s, peer_id, &m.u.accept, my_psn);
  if (rc == 0) rc = await_confirm_link(s);
  if (rc != 0) {
    destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}

// ---- server ----------------------------------------------------------------------------

static int send_decline(int fd, uint32_t diag) {
  struct rrpc__clc_decline d;
  memset(&d, 0, sizeof d);
  d.diag = diag;
  d.os_type = 2;
  uint8_t buf[RRPC_CLC_DECLINE_V2_LEN];
  size_t len = 0;
  int rc = rrpc__clc_encode_decline_v2(&d, buf, sizeof buf, &len);
  return rc != 0 ? rc : io_full(fd, buf, len, 1);
}

// The Proposal must offer SMC-Rv2 with a RoCEv2 GID and one of our UEIDs (in *eid).
static uint32_t check_proposal(const struct rrpc_kstream_opts *o, const struct rrpc__clc_msg *m,
                               uint8_t eid[RRPC_CLC_EID_LEN]) {
  if (m->hdr.type != RRPC_CLC_PROPOSAL) return RRPC_CLC_DECL_SYNCERR;
  const struct rrpc__clc_proposal *p = &m->u.proposal;
  if (m->hdr.version < 2 || !p->has_v2_ext ||
      (m->hdr.typev2 != RRPC_CLC_SMC_R && m->hdr.typev2 != RRPC_CLC_SMC_B))
    return RRPC_CLC_DECL_NOV2EXT;
  struct rrpc__smc_config cfg;
  const char *why = NULL;
  memset(&cfg, 0, sizeof cfg);
  if (rrpc__smc_parse_ueids(o->ueids, &cfg, &why) != 0 ||
      rrpc__smc_ueid_match(&cfg, (const uint8_t(*)[RRPC_CLC_EID_LEN])p->eids, p->eid_count, eid) != 0)
    return RRPC_CLC_DECL_NOUEID;
  return 0;
}

static int send_accept(int fd, const struct rrpc_kstream *s, const uint8_t peer_id[8],
                       const uint8_t eid[RRPC_CLC_EID_LEN], uint32_t my_psn) {
  struct rrpc__clc_accept a;
  // MTU 1024 (IB enum 3): what a 6.1 server announces over rxe on a 1500-byte netdev.
  fill_first_contact(s, peer_id, 3, my_psn, &a);
  a.type = RRPC_CLC_ACCEPT;
  memcpy(a.eid, eid, RRPC_CLC_EID_LEN);
  a.v2_direct = 1;
  uint8_t buf[RRPC_CLC_MAX_LEN];
  size_t len = 0;
  int rc = rrpc__clc_encode_accept_v2(&a, buf, sizeof buf, &len);
  return rc != 0 ? rc : io_full(fd, buf, len, 1);
}

// As the link group's server: CONFIRM_LINK request, then the client's response (on_llc).
static int confirm_link_as_server(struct rrpc_kstream *s) {
  struct rrpc__llc_msg m;
  memset(&m, 0, sizeof m);
  m.type = RRPC_LLC_CONFIRM_LINK;
  m.version = 2;
  m.flags = RRPC_LLC_FLAG_NO_RMBE_EYEC;
  memcpy(m.u.confirm_link.mac, s->self.mac, 6);
  memcpy(m.u.confirm_link.gid, s->self.gid, 16);
  m.u.confirm_link.qpn = s->self.qpn;
  m.u.confirm_link.link_num = 1;
  const uint8_t uid[4] = {0x52, 0x52, 0x00, 0x01};
  memcpy(m.u.confirm_link.link_uid, uid, 4);
  m.u.confirm_link.max_links = 2; // what 6.1 announces; an ADD_LINK never follows from here
  s->link_num = 1;
  int rc = send_llc(s, &m);
  return rc != 0 ? rc : await_confirm_link(s);
}

// A server's link kept after its connection closed (rrpc_kstream_close with keep_link): the
// next connection from the same kernel client goes on it. Test programs serve one connection
// at a time, so one parked link is enough.
static struct rrpc_kstream *parked;

// Waits for the client's Confirm on fd while the link is served: the kernel client registers
// its new RMB with CONFIRM_RKEY and waits for our answer before it sends the Confirm.
static int read_clc_serving_link(int fd, struct rrpc_kstream *s, struct rrpc__clc_msg *m) {
  int64_t end = now_ms() + s->timeout_ms;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) == 1) return read_clc(fd, m);
    if (!link_ok(s)) return -ECONNRESET;
    int left = (int)(end - now_ms());
    if (left <= 0) return -ETIMEDOUT;
    // The CQ's wait is short so that the socket is looked at again soon.
    (void)progress(s, left < 20 ? left : 20);
  }
}

// The second and later connection of a kernel client on the parked link: a new RMB and token,
// an Accept without first contact (its QP is the link's), the Confirm.
static int accept_on_parked(int fd, struct rrpc_kstream *s, const uint8_t eid[RRPC_CLC_EID_LEN]) {
  s->token++;
  s->rmb_mr = alloc_mr(s, &s->rmb, (uint32_t)RRPC_CLC_RING_MIN << s->ring_code,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (s->rmb_mr == NULL) return -ENOMEM;
  uint8_t peer_id[8] = {(uint8_t)(getpid() >> 8), (uint8_t)getpid()};
  memcpy(peer_id + 2, s->self.mac, 6);
  struct rrpc__clc_accept a;
  fill_first_contact(s, peer_id, 3, 0, &a);
  a.type = RRPC_CLC_ACCEPT;
  a.first_contact = 0;
  a.has_fce = 0;
  memcpy(a.eid, eid, RRPC_CLC_EID_LEN);
  uint8_t buf[RRPC_CLC_MAX_LEN];
  size_t len = 0;
  struct rrpc__clc_msg m;
  int rc = rrpc__clc_encode_accept_v2(&a, buf, sizeof buf, &len);
  if (rc == 0) rc = io_full(fd, buf, len, 1);
  if (rc == 0) rc = read_clc_serving_link(fd, s, &m);
  if (rc == 0 && (m.hdr.type != RRPC_CLC_CONFIRM || m.u.accept.first_contact)) rc = -EPROTO;
  if (rc == 0) rc = set_peer(s, &m.u.accept);
  s->st.reused = 1;
  return rc;
}

static void end_link(struct rrpc_kstream *s);

// A new link group for this connection: its Proposal `m` was read and checked.
static int accept_first_contact(int fd, const struct rrpc_kstream_opts *o,
                                const struct rrpc__clc_msg *m, const uint8_t eid[RRPC_CLC_EID_LEN],
                                rrpc_kstream **out) {
  struct rrpc_kstream *s = calloc(1, sizeof *s);
  if (s == NULL) return -ENOMEM;
  s->timeout_ms = o->timeout_ms;
  s->is_server = 1;
  memcpy(s->client_sysid, m->u.proposal.peer_id, 8);
  memcpy(s->client_gid, m->u.proposal.roce_v2_gid, 16);
  int rc = read_gid(o->ibdev, o->gid_index, s->self.gid);
  if (rc == 0) rc = read_mac(o->netdev, s->self.mac);
  uint8_t peer_id[8] = {(uint8_t)(getpid() >> 8), (uint8_t)getpid()};
  memcpy(peer_id + 2, s->self.mac, 6);
  uint32_t my_psn = random_psn();
  struct rrpc__clc_msg c;
  if (rc == 0) rc = create_objects(s, o);
  if (rc == 0) rc = send_accept(fd, s, peer_id, eid, my_psn);
  if (rc == 0) rc = read_clc(fd, &c);
  if (rc == 0 && (c.hdr.type != RRPC_CLC_CONFIRM || !c.u.accept.first_contact)) rc = -EPROTO;
  if (rc == 0) rc = set_peer(s, &c.u.accept);
  if (rc == 0) rc = bring_up(s, o->gid_index, &c.u.accept, my_psn);
  if (rc == 0) rc = confirm_link_as_server(s);
  if (rc != 0) {
    destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}

int rrpc_kstream_accept(int fd, const struct rrpc_kstream_opts *o, rrpc_kstream **out,
                        uint32_t *declined) {
  struct rrpc_kstream *s = parked;
  parked = NULL;
  *declined = 0;
  struct rrpc__clc_msg m;
  uint8_t eid[RRPC_CLC_EID_LEN];
  // With a parked link its LLC is served while the Proposal is awaited.
  int rc = s != NULL ? read_clc_serving_link(fd, s, &m) : read_clc(fd, &m);
  if (rc == 0 && (*declined = check_proposal(o, &m, eid)) != 0) {
    (void)send_decline(fd, *declined);
    rc = -ECONNREFUSED;
  }
  if (rc == 0 && s != NULL && link_ok(s) && memcmp(m.u.proposal.peer_id, s->client_sysid, 8) == 0 &&
      memcmp(m.u.proposal.roce_v2_gid, s->client_gid, 16) == 0) {
    rc = accept_on_parked(fd, s, eid);
    if (rc == 0) {
      *out = s;
      return 0;
    }
  }
  if (s != NULL) end_link(s); // another client, or the reuse failed: that link is done
  if (rc != 0) return rc;
  return accept_first_contact(fd, o, &m, eid, out);
}

// ---- the stream ------------------------------------------------------------------------

int rrpc_kstream_write(rrpc_kstream *s, const void *buf, size_t len) {
  const uint8_t *p = buf;
  int64_t deadline = now_ms() + s->timeout_ms;
  while (len > 0) {
    if (!link_ok(s) || (s->w.rx_conn_flags & (RRPC_CDC_CS_CLOSED | RRPC_CDC_CS_ABNORMAL)))
      return -ECONNRESET;
    struct rrpc__cur_seg seg[2];
    int nseg = 0;
    uint32_t n = rrpc__cur_tx_plan(&s->w, len, seg, &nseg);
    if (n == 0 || s->sends_out + 3 > SQ_DEPTH) {
      if (n == 0 && !(s->w.tx_flags & RRPC_CDC_PF_WRITE_BLOCKED)) {
        // Tell the peer we wait for room: the kernel then sends its consumer cursor.
        s->w.tx_flags |= RRPC_CDC_PF_WRITE_BLOCKED;
        s->st.write_blocked++;
        if (send_cdc(s, 0) != 0) s->w.tx_flags &= (uint8_t)~RRPC_CDC_PF_WRITE_BLOCKED;
      }
      int left = (int)(deadline - now_ms());
      if (left <= 0 || progress(s, left) == -ETIMEDOUT) return -ETIMEDOUT;
      continue;
    }
    s->w.tx_flags &= (uint8_t)~RRPC_CDC_PF_WRITE_BLOCKED;
    struct ibv_send_wr wr[2], *bad;
    struct ibv_sge sge[2];
    uint32_t done = 0;
    for (int i = 0; i < nseg; i++) {
      // The staging buffer mirrors the peer's RMB: a byte waits there at the offset it goes
      // to, and that offset is written again only after the peer consumed it.
      memcpy(s->staging + seg[i].off, p + done, seg[i].len);
      sge[i] = (struct ibv_sge){.addr = (uintptr_t)(s->staging + seg[i].off),
                                .length = seg[i].len, .lkey = s->staging_mr->lkey};
      wr[i] = (struct ibv_send_wr){.wr_id = WR_WRITE, .sg_list = &sge[i], .num_sge = 1,
                                   .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
                                   .next = i + 1 < nseg ? &wr[i + 1] : NULL};
      wr[i].wr.rdma.remote_addr = s->peer_addr + seg[i].off;
      wr[i].wr.rdma.rkey = s->peer_rkey;
      done += seg[i].len;
    }
    if (ibv_post_send(s->qp, wr, &bad) != 0) return -EIO;
    s->sends_out += (unsigned)nseg;
    rrpc__cur_tx_commit(&s->w, n);
    if (send_cdc(s, 0) != 0) return -EIO;
    p += n;
    len -= n;
    s->st.bytes_tx += n;
    deadline = now_ms() + s->timeout_ms;
  }
  return 0;
}

long rrpc_kstream_read(rrpc_kstream *s, void *buf, size_t len) {
  int64_t deadline = now_ms() + s->timeout_ms;
  while (s->w.rx_prod == s->w.rx_cons) {
    if (s->w.rx_conn_flags & RRPC_CDC_CS_ABNORMAL) return -ECONNRESET;
    if (s->w.rx_conn_flags & (RRPC_CDC_CS_CLOSED | RRPC_CDC_CS_DONE_WRITING)) return 0;
    if (!link_ok(s)) return -ECONNRESET;
    int left = (int)(deadline - now_ms());
    if (left <= 0 || progress(s, left) == -ETIMEDOUT) return -ETIMEDOUT;
  }
  uint64_t avail = s->w.rx_prod - s->w.rx_cons;
  uint32_t off = (uint32_t)(s->w.rx_cons % s->w.rx_ring);
  size_t n = len < avail ? len : (size_t)avail;
  if (n > s->w.rx_ring - off) n = s->w.rx_ring - off; // up to the ring's end; the rest next call
  memcpy(buf, s->rmb + off, n);
  rrpc__cur_rx_consume(&s->w, (uint32_t)n);
  s->st.bytes_rx += n;
  if (rrpc__cur_update_due(&s->w)) (void)send_cdc(s, 0);
  return (long)n;
}

// Waits, at most until `end`, for cond(s) or the link's loss.
static void wait_until(struct rrpc_kstream *s, int (*cond)(const struct rrpc_kstream *), int64_t end) {
  while (!cond(s) && link_ok(s)) {
    int left = (int)(end - now_ms());
    if (left <= 0 || progress(s, left) == -ETIMEDOUT) return;
  }
}

static int peer_closed(const struct rrpc_kstream *s) {
  return (s->w.rx_conn_flags & (RRPC_CDC_CS_CLOSED | RRPC_CDC_CS_ABNORMAL)) != 0;
}

static int peer_freed_rmb(const struct rrpc_kstream *s) {
  return s->st.llc_rx[RRPC_LLC_DELETE_RKEY] > 0;
}

// DELETE_LINK (all links, orderly), then every verbs object freed once the sends left.
static void end_link(struct rrpc_kstream *s) {
  if (link_ok(s)) {
    struct rrpc__llc_msg d;
    memset(&d, 0, sizeof d);
    d.type = RRPC_LLC_DELETE_LINK;
    d.version = 2;
    d.flags = RRPC_LLC_FLAG_DEL_LINK_ALL | RRPC_LLC_FLAG_DEL_LINK_ORDERLY;
    d.u.delete_link.link_num = s->link_num;
    d.u.delete_link.reason = RRPC_LLC_DEL_PROG_INIT_TERM;
    (void)send_llc(s, &d);
  }
  int64_t end = now_ms() + 2000;
  while (s->sends_out > 0 && !s->qp_error && now_ms() < end) (void)progress(s, (int)(end - now_ms()));
  destroy(s);
}

// Frees what belongs to the connection, not the link: its RMB and the peer RMB's mirror.
static void end_connection(struct rrpc_kstream *s) {
  ibv_dereg_mr(s->rmb_mr);
  ibv_dereg_mr(s->staging_mr);
  free(s->rmb);
  free(s->staging);
  s->rmb_mr = s->staging_mr = NULL;
  s->rmb = s->staging = NULL;
  memset(&s->w, 0, sizeof s->w);
  uint32_t my_qpn = s->st.my_qpn, kernel_qpn = s->st.kernel_qpn;
  memset(&s->st, 0, sizeof s->st);
  s->st.my_qpn = my_qpn;
  s->st.kernel_qpn = kernel_qpn;
}

int rrpc_kstream_close(rrpc_kstream *s, struct rrpc_kstream_stats *final, int keep_link) {
  int rc = 0;
  // The kernel's order for an orderly close: my CDC with "closed" (cursors current), then
  // the peer's own.
  if (link_ok(s) && send_cdc(s, RRPC_CDC_CS_CLOSED) != 0) rc = -EIO;
  if (rc == 0) wait_until(s, peer_closed, now_ms() + s->timeout_ms);
  if (rc == 0 && !peer_closed(s)) rc = link_ok(s) ? -ETIMEDOUT : -ECONNRESET;
  // The kernel frees the connection after its socket release and then deletes its RMB's rkey
  // (DELETE_RKEY), expecting the answer within 2 s or it takes the link down: wait for it
  // (bounded). Only then may the link go: a link deleted while the kernel's close still runs
  // can deadlock 6.1's socket release (seen: a kernel client stuck for good in
  // __smc_release's lock_sock).
  wait_until(s, peer_freed_rmb, now_ms() + 3000);
  if (final != NULL) *final = s->st;
  if (keep_link && s->is_server && link_ok(s)) {
    end_connection(s);
    if (parked != NULL) end_link(parked);
    parked = s;
    return rc;
  }
  end_link(s);
  return rc;
}

void rrpc_kstream_end_parked(void) {
  if (parked != NULL) end_link(parked);
  parked = NULL;
}

static int test_links_seen(const struct rrpc_kstream *s) {
  return s->st.llc_rx[RRPC_LLC_TEST_LINK] >= s->test_links_wanted;
}

unsigned rrpc_kstream_await_test_link(rrpc_kstream *s, unsigned count, int max_ms) {
  s->test_links_wanted = count;
  wait_until(s, test_links_seen, now_ms() + max_ms);
  return s->st.llc_rx[RRPC_LLC_TEST_LINK];
}

const struct rrpc_kstream_stats *rrpc_kstream_stats(const rrpc_kstream *s) { return &s->st; }
