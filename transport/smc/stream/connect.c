// transport/smc/stream/connect.c - rrpc_smc_stream_connect: the client's CLC v2 against a kernel AF_SMC server.
#include "transport/smc/stream/stream.h"

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

int rrpc__ss_read_clc(int fd, struct rrpc__clc_msg *m) {
  uint8_t buf[RRPC_CLC_MAX_LEN];
  struct rrpc__clc_hdr h;
  int rc = rrpc__ss_io_full(fd, buf, RRPC_CLC_HDR_LEN, 0);
  if (rc == 0) rc = rrpc__clc_peek_header(buf, RRPC_CLC_HDR_LEN, &h);
  if (rc == 0) rc = rrpc__ss_io_full(fd, buf + RRPC_CLC_HDR_LEN, (size_t)h.length - RRPC_CLC_HDR_LEN, 0);
  return rc != 0 ? rc : rrpc__clc_decode(buf, h.length, m);
}

static int send_proposal(int fd, const struct rrpc_smc_stream_opts *o, const uint8_t peer_id[8],
                         const uint8_t gid[16]) {
  struct rrpc__smc_config cfg;
  memset(&cfg, 0, sizeof cfg);
  if (rrpc__ss_ueids(o, &cfg) != 0) return -EINVAL;
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
  return rc != 0 ? rc : rrpc__ss_io_full(fd, buf, len, 1);
}

// My half of the first-contact Accept (server) or Confirm (client): this end's QP, RMB and PSN.
void rrpc__ss_fill_first_contact(const struct rrpc_smc_stream *s, const uint8_t peer_id[8],
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

uint32_t rrpc__ss_random_psn(void) {
  uint32_t psn;
  if (getrandom(&psn, sizeof psn, 0) != sizeof psn) psn = (uint32_t)rrpc__ss_now_ms();
  return psn & 0xffffff;
}

static int send_confirm(int fd, const struct rrpc_smc_stream *s, const uint8_t peer_id[8],
                        const struct rrpc__clc_accept *a, uint32_t my_psn) {
  struct rrpc__clc_accept c;
  rrpc__ss_fill_first_contact(s, peer_id, a->mtu, my_psn, &c);
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
  return rc != 0 ? rc : rrpc__ss_io_full(fd, buf, len, 1);
}

// Waits for the kernel's CONFIRM_LINK request (answered in rrpc__ss_on_llc).
int rrpc__ss_await_confirm_link(struct rrpc_smc_stream *s) {
  int64_t end = rrpc__ss_now_ms() + s->timeout_ms;
  while (!s->confirmed && rrpc__ss_link_ok(s)) {
    int left = (int)(end - rrpc__ss_now_ms());
    if (left <= 0 || rrpc__ss_progress(s, left) == -ETIMEDOUT) return -ETIMEDOUT;
  }
  return s->confirmed ? 0 : -ECONNRESET;
}

static int connect_on(int fd, const struct rrpc_smc_stream_opts *o, uint8_t port,
                      rrpc_smc_stream **out, uint32_t *decline) {
  struct rrpc_smc_stream *s = calloc(1, sizeof *s);
  if (s == NULL) return -ENOMEM;
  s->timeout_ms = o->timeout_ms;
  s->port = port;
  int rc = rrpc__ss_read_gid(o->ibdev, s->port, o->gid_index, s->self.gid);
  if (rc == 0) rc = rrpc__ss_read_mac(o->netdev, s->self.mac);
  // The system ID (as Linux builds it: 2 bytes, then the MAC), the 2 bytes from the pid: the
  // kernel matches link groups by it first, so this process gets a link group of its own.
  uint8_t peer_id[8] = {(uint8_t)(getpid() >> 8), (uint8_t)getpid()};
  memcpy(peer_id + 2, s->self.mac, 6);
  if (rc == 0) rc = send_proposal(fd, o, peer_id, s->self.gid);
  struct rrpc__clc_msg m;
  if (rc == 0) rc = rrpc__ss_read_clc(fd, &m);
  if (rc == 0 && m.hdr.type == RRPC_CLC_DECLINE) {
    *decline = m.u.decline.diag;
    rc = -ECONNREFUSED;
  } else if (rc == 0 && (m.hdr.type != RRPC_CLC_ACCEPT || !m.u.accept.first_contact)) {
    rc = -EPROTO;
  }
  uint32_t my_psn = rrpc__ss_random_psn();
  if (rc == 0) rc = rrpc__ss_create_objects(s, o);
  if (rc == 0) rc = rrpc__ss_set_peer(s, &m.u.accept);
  if (rc == 0) rc = rrpc__ss_bring_up(s, o->gid_index, &m.u.accept, my_psn);
  if (rc == 0) rc = send_confirm(fd, s, peer_id, &m.u.accept, my_psn);
  if (rc == 0) rc = rrpc__ss_await_confirm_link(s);
  if (rc != 0) {
    rrpc__ss_destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}


int rrpc_smc_stream_connect(int fd, const struct rrpc_smc_stream_opts *o, rrpc_smc_stream **out,
                            uint32_t *decline) {
  struct rrpc_smc_stream_opts r;
  uint8_t port;
  *decline = 0;
  int rc = rrpc__ss_resolve(o, &r, &port);
  return rc != 0 ? rc : connect_on(fd, &r, port, out, decline);
}
