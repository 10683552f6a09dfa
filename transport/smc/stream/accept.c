// transport/smc/stream/accept.c - rrpc_smc_stream_accept: the server's CLC v2 for a kernel AF_SMC client, and the link it keeps.
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

static int send_decline(int fd, uint32_t diag) {
  struct rrpc__clc_decline d;
  memset(&d, 0, sizeof d);
  d.diag = diag;
  d.os_type = 2;
  uint8_t buf[RRPC_CLC_DECLINE_V2_LEN];
  size_t len = 0;
  int rc = rrpc__clc_encode_decline_v2(&d, buf, sizeof buf, &len);
  return rc != 0 ? rc : rrpc__ss_io_full(fd, buf, len, 1);
}

// The Proposal must offer SMC-Rv2 with a RoCEv2 GID and one of our UEIDs (in *eid).
static uint32_t check_proposal(const struct rrpc_smc_stream_opts *o, const struct rrpc__clc_msg *m,
                               uint8_t eid[RRPC_CLC_EID_LEN]) {
  if (m->hdr.type != RRPC_CLC_PROPOSAL) return RRPC_CLC_DECL_SYNCERR;
  const struct rrpc__clc_proposal *p = &m->u.proposal;
  if (m->hdr.version < 2 || !p->has_v2_ext ||
      (m->hdr.typev2 != RRPC_CLC_SMC_R && m->hdr.typev2 != RRPC_CLC_SMC_B))
    return RRPC_CLC_DECL_NOV2EXT;
  struct rrpc__smc_config cfg;
  memset(&cfg, 0, sizeof cfg);
  if (rrpc__ss_ueids(o, &cfg) != 0 ||
      rrpc__smc_ueid_match(&cfg, (const uint8_t(*)[RRPC_CLC_EID_LEN])p->eids, p->eid_count, eid) != 0)
    return RRPC_CLC_DECL_NOUEID;
  return 0;
}

static int send_accept(int fd, const struct rrpc_smc_stream *s, const uint8_t peer_id[8],
                       const uint8_t eid[RRPC_CLC_EID_LEN], uint32_t my_psn) {
  struct rrpc__clc_accept a;
  // MTU 1024 (IB enum 3): what a 6.1 server announces over rxe on a 1500-byte netdev.
  rrpc__ss_fill_first_contact(s, peer_id, 3, my_psn, &a);
  a.type = RRPC_CLC_ACCEPT;
  memcpy(a.eid, eid, RRPC_CLC_EID_LEN);
  a.v2_direct = 1;
  uint8_t buf[RRPC_CLC_MAX_LEN];
  size_t len = 0;
  int rc = rrpc__clc_encode_accept_v2(&a, buf, sizeof buf, &len);
  return rc != 0 ? rc : rrpc__ss_io_full(fd, buf, len, 1);
}

// As the link group's server: CONFIRM_LINK request, then the client's response (rrpc__ss_on_llc).
static int confirm_link_as_server(struct rrpc_smc_stream *s) {
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
  int rc = rrpc__ss_send_llc(s, &m);
  return rc != 0 ? rc : rrpc__ss_await_confirm_link(s);
}

// A server's link kept after its connection closed (rrpc_smc_stream_close with keep_link): the
// next connection from the same kernel client goes on it. Test programs serve one connection
// at a time, so one kept link is enough.
struct rrpc_smc_stream *rrpc__ss_parked;

// Waits for the client's Confirm on fd while the link is served: the kernel client registers
// its new RMB with CONFIRM_RKEY and waits for our answer before it sends the Confirm.
static int read_clc_serving_link(int fd, struct rrpc_smc_stream *s, struct rrpc__clc_msg *m) {
  int64_t end = rrpc__ss_now_ms() + s->timeout_ms;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) == 1) return rrpc__ss_read_clc(fd, m);
    if (!rrpc__ss_link_ok(s)) return -ECONNRESET;
    int left = (int)(end - rrpc__ss_now_ms());
    if (left <= 0) return -ETIMEDOUT;
    // The CQ's wait is short so that the socket is looked at again soon.
    (void)rrpc__ss_progress(s, left < 20 ? left : 20);
  }
}

// The second and later connection of a kernel client on the kept link: a new RMB and token,
// an Accept without first contact (its QP is the link's), the Confirm.
static int accept_on_parked(int fd, struct rrpc_smc_stream *s, const uint8_t eid[RRPC_CLC_EID_LEN]) {
  s->token++;
  s->rmb_mr = rrpc__ss_alloc_mr(s, &s->rmb, (uint32_t)RRPC_CLC_RING_MIN << s->ring_code,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (s->rmb_mr == NULL) return -ENOMEM;
  uint8_t peer_id[8] = {(uint8_t)(getpid() >> 8), (uint8_t)getpid()};
  memcpy(peer_id + 2, s->self.mac, 6);
  struct rrpc__clc_accept a;
  rrpc__ss_fill_first_contact(s, peer_id, 3, 0, &a);
  a.type = RRPC_CLC_ACCEPT;
  a.first_contact = 0;
  a.has_fce = 0;
  memcpy(a.eid, eid, RRPC_CLC_EID_LEN);
  uint8_t buf[RRPC_CLC_MAX_LEN];
  size_t len = 0;
  struct rrpc__clc_msg m;
  int rc = rrpc__clc_encode_accept_v2(&a, buf, sizeof buf, &len);
  if (rc == 0) rc = rrpc__ss_io_full(fd, buf, len, 1);
  if (rc == 0) rc = read_clc_serving_link(fd, s, &m);
  if (rc == 0 && (m.hdr.type != RRPC_CLC_CONFIRM || m.u.accept.first_contact)) rc = -EPROTO;
  if (rc == 0) rc = rrpc__ss_set_peer(s, &m.u.accept);
  s->st.reused = 1;
  return rc;
}


// A new link group for this connection: its Proposal `m` was read and checked.
static int accept_first_contact(int fd, const struct rrpc_smc_stream_opts *o,
                                const struct rrpc__clc_msg *m, const uint8_t eid[RRPC_CLC_EID_LEN],
                                rrpc_smc_stream **out) {
  struct rrpc_smc_stream_opts r;
  uint8_t port;
  int rc = rrpc__ss_resolve(o, &r, &port);
  if (rc != 0) return rc;
  o = &r;
  struct rrpc_smc_stream *s = calloc(1, sizeof *s);
  if (s == NULL) return -ENOMEM;
  s->timeout_ms = o->timeout_ms;
  s->port = port;
  s->is_server = 1;
  memcpy(s->client_sysid, m->u.proposal.peer_id, 8);
  memcpy(s->client_gid, m->u.proposal.roce_v2_gid, 16);
  rc = rrpc__ss_read_gid(o->ibdev, s->port, o->gid_index, s->self.gid);
  if (rc == 0) rc = rrpc__ss_read_mac(o->netdev, s->self.mac);
  uint8_t peer_id[8] = {(uint8_t)(getpid() >> 8), (uint8_t)getpid()};
  memcpy(peer_id + 2, s->self.mac, 6);
  uint32_t my_psn = rrpc__ss_random_psn();
  struct rrpc__clc_msg c;
  if (rc == 0) rc = rrpc__ss_create_objects(s, o);
  if (rc == 0) rc = send_accept(fd, s, peer_id, eid, my_psn);
  if (rc == 0) rc = rrpc__ss_read_clc(fd, &c);
  if (rc == 0 && (c.hdr.type != RRPC_CLC_CONFIRM || !c.u.accept.first_contact)) rc = -EPROTO;
  if (rc == 0) rc = rrpc__ss_set_peer(s, &c.u.accept);
  if (rc == 0) rc = rrpc__ss_bring_up(s, o->gid_index, &c.u.accept, my_psn);
  if (rc == 0) rc = confirm_link_as_server(s);
  if (rc != 0) {
    rrpc__ss_destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}

int rrpc_smc_stream_accept(int fd, const struct rrpc_smc_stream_opts *o, rrpc_smc_stream **out,
                        uint32_t *declined) {
  struct rrpc_smc_stream *s = rrpc__ss_parked;
  rrpc__ss_parked = NULL;
  *declined = 0;
  struct rrpc__clc_msg m;
  uint8_t eid[RRPC_CLC_EID_LEN];
  // With a kept link its LLC is served while the Proposal is awaited.
  int rc = s != NULL ? read_clc_serving_link(fd, s, &m) : rrpc__ss_read_clc(fd, &m);
  if (rc == 0 && (*declined = check_proposal(o, &m, eid)) != 0) {
    (void)send_decline(fd, *declined);
    rc = -ECONNREFUSED;
  }
  if (rc == 0 && s != NULL && rrpc__ss_link_ok(s) && memcmp(m.u.proposal.peer_id, s->client_sysid, 8) == 0 &&
      memcmp(m.u.proposal.roce_v2_gid, s->client_gid, 16) == 0) {
    rc = accept_on_parked(fd, s, eid);
    if (rc == 0) {
      *out = s;
      return 0;
    }
  }
  if (s != NULL) rrpc__ss_end_link(s); // another client, or the reuse failed: that link is done
  if (rc != 0) return rc;
  return accept_first_contact(fd, o, &m, eid, out);
}

