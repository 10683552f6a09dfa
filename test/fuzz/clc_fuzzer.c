/* clc_fuzzer.c - libFuzzer target for the SMC-R CLC codec
 * (transport/smc/clc.h): any bytes through peek/decode and the
 * per-type decoders (they must agree with the generic one and stay in
 * bounds); every v1 SMC-R message that decodes must re-encode to the input's
 * bytes, up to the bits the v1 layout reserves; every decoded message must
 * survive an encode -> decode round trip with its values intact (v2 ones
 * through the v2 encoders too). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "transport/smc/clc.h"

static void check(int ok, const char *what, int line) {
  if (!ok) {
    fprintf(stderr, "clc_fuzzer: check failed at line %d: %s\n", line, what);
    abort();
  }
}

static int rc_ok(int rc) { return rc == 0 || rc == -EAGAIN || rc == -RRPC_EPARSE; }

static void proposal_roundtrip(const struct rrpc__clc_proposal *p) {
  uint8_t buf[RRPC_CLC_MAX_LEN];
  size_t len = 0;
  struct rrpc__clc_proposal q;
  size_t i;
  check(rrpc__clc_encode_proposal(p, buf, sizeof(buf), &len) == 0, "encode proposal", __LINE__);
  check(rrpc__clc_decode_proposal(buf, len, &q) == 0, "re-decode proposal", __LINE__);
  check(memcmp(p->peer_id, q.peer_id, 8) == 0 && memcmp(p->gid, q.gid, 16) == 0 &&
            memcmp(p->mac, q.mac, 6) == 0,
        "proposal local area", __LINE__);
  check(q.has_ip_area && p->ipv4_subnet == q.ipv4_subnet &&
            p->ipv4_prefix_len == q.ipv4_prefix_len && p->rrpc_features == q.rrpc_features &&
            p->rrpc_version == q.rrpc_version && p->ipv6_count == q.ipv6_count,
        "proposal ip area", __LINE__);
  for (i = 0; i < p->ipv6_count; i++)
    check(memcmp(p->ipv6[i].prefix, q.ipv6[i].prefix, 16) == 0 && p->ipv6[i].len == q.ipv6[i].len,
          "ipv6 prefix", __LINE__);
}

static void accept_roundtrip(const struct rrpc__clc_accept *a) {
  uint8_t buf[RRPC_CLC_MAX_LEN];
  size_t len = 0;
  struct rrpc__clc_accept b;
  check(rrpc__clc_encode_accept(a, buf, sizeof(buf), &len) == 0, "encode accept", __LINE__);
  check(rrpc__clc_decode_accept(buf, len, &b) == 0, "re-decode accept", __LINE__);
  check(a->type == b.type && a->first_contact == b.first_contact && a->qpn == b.qpn &&
            a->rkey == b.rkey && a->rmbe_idx == b.rmbe_idx && a->token == b.token &&
            a->ring_code == b.ring_code && a->mtu == b.mtu &&
            a->rq_depth_log2 == b.rq_depth_log2 && a->ring_addr == b.ring_addr &&
            a->rrpc_features == b.rrpc_features && a->psn == b.psn &&
            memcmp(a->peer_id, b.peer_id, 8) == 0 && memcmp(a->gid, b.gid, 16) == 0 &&
            memcmp(a->mac, b.mac, 6) == 0,
        "accept fields", __LINE__);
}

static void decline_roundtrip(const struct rrpc__clc_decline *d) {
  uint8_t buf[64];
  size_t len = 0;
  struct rrpc__clc_decline e;
  check(rrpc__clc_encode_decline(d, buf, sizeof(buf), &len) == 0, "encode decline", __LINE__);
  check(rrpc__clc_decode_decline(buf, len, &e) == 0, "re-decode decline", __LINE__);
  check(d->diag == e.diag && d->out_of_sync == e.out_of_sync &&
            memcmp(d->peer_id, e.peer_id, 8) == 0,
        "decline fields", __LINE__);
}

/* A v1 SMC-R message re-encodes to exactly its own bytes once the bits the
 * v1 layouts leave reserved are normalised: byte 7 is rebuilt from version,
 * flag and path (rrpc writes path R); a Decline's bytes 20..23 are zeroed
 * and its trailer (which Linux does not check) is the eyecatcher. */
static void v1_bytes_match(const uint8_t *in, const struct rrpc__clc_msg *m) {
  uint8_t want[RRPC_CLC_MAX_LEN], got[RRPC_CLC_MAX_LEN];
  size_t len = m->hdr.length, got_len = 0;
  int rc;
  if (m->hdr.version != 1 || m->hdr.smcd) return;
  memcpy(want, in, len);
  switch (m->hdr.type) {
    case RRPC_CLC_PROPOSAL:
      /* rrpc encodes SMC-R only, a zeroed 40-byte SMC-D area, then the IP
       * area. */
      if (m->u.proposal.iparea_offset != RRPC_CLC_PROPOSAL_SMCD_AREA_LEN ||
          m->hdr.typev1 != RRPC_CLC_SMC_R)
        return;
      want[7] = 0x10;
      memset(want + 40, 0, RRPC_CLC_PROPOSAL_SMCD_AREA_LEN);
      rc = rrpc__clc_encode_proposal(&m->u.proposal, got, sizeof(got), &got_len);
      break;
    case RRPC_CLC_ACCEPT:
    case RRPC_CLC_CONFIRM:
      want[7] = (uint8_t)(0x10 | (m->hdr.flag << 3));
      rc = rrpc__clc_encode_accept(&m->u.accept, got, sizeof(got), &got_len);
      break;
    default:
      if (len != RRPC_CLC_DECLINE_V1_LEN) return;
      want[7] = (uint8_t)(0x10 | (m->hdr.flag << 3));
      memset(want + 20, 0, 4);
      memcpy(want + 24, want, 4);
      rc = rrpc__clc_encode_decline(&m->u.decline, got, sizeof(got), &got_len);
      break;
  }
  check(rc == 0, "v1 re-encode", __LINE__);
  check(got_len == len && memcmp(want, got, len) == 0, "v1 bytes differ after re-encode",
        __LINE__);
}

/* A v2 SMC-R message re-encoded with the v2 encoders (clc_v2.c) decodes to
 * the same values (the layout may differ where the input used an older one:
 * a Confirm's GID list right after the hostname). */
static void v2_roundtrip(const struct rrpc__clc_msg *m) {
  uint8_t buf[RRPC_CLC_MAX_LEN];
  size_t len = 0, i;
  struct rrpc__clc_msg b;
  if (m->hdr.version < 2 || m->hdr.smcd) return;
  if (m->hdr.type == RRPC_CLC_PROPOSAL) {
    const struct rrpc__clc_proposal *p = &m->u.proposal;
    if (p->ism_gid_count != 0 || (!p->has_ip_area && !p->has_v2_ext)) return;
    if (rrpc__clc_encode_proposal_v2(p, buf, sizeof(buf), &len) != 0) return; /* over 1024 */
    check(rrpc__clc_decode(buf, len, &b) == 0, "re-decode v2 proposal", __LINE__);
    const struct rrpc__clc_proposal *q = &b.u.proposal;
    check(q->has_ip_area == p->has_ip_area && q->has_v2_ext == p->has_v2_ext &&
              q->ipv4_subnet == p->ipv4_subnet && q->ipv6_count == p->ipv6_count &&
              q->eid_count == p->eid_count && q->v2_release == p->v2_release &&
              q->v2_seid == p->v2_seid && q->max_conns == p->max_conns &&
              q->max_links == p->max_links && q->feature_mask == p->feature_mask &&
              memcmp(q->roce_v2_gid, p->roce_v2_gid, 16) == 0,
          "v2 proposal fields", __LINE__);
    for (i = 0; i < p->eid_count; i++)
      check(memcmp(q->eids[i], p->eids[i], RRPC_CLC_EID_LEN) == 0, "v2 eid", __LINE__);
    return;
  }
  if (m->hdr.type == RRPC_CLC_DECLINE) {
    check(rrpc__clc_encode_decline_v2(&m->u.decline, buf, sizeof(buf), &len) == 0, "encode v2 decline", __LINE__);
    check(rrpc__clc_decode(buf, len, &b) == 0 && b.u.decline.diag == m->u.decline.diag &&
              b.u.decline.os_type == m->u.decline.os_type &&
              (m->hdr.length != RRPC_CLC_DECLINE_V2_LEN ||
               memcmp(b.u.decline.diag_v2, m->u.decline.diag_v2, sizeof(b.u.decline.diag_v2)) == 0),
          "v2 decline fields", __LINE__);
    return;
  }
  {
    const struct rrpc__clc_accept *a = &m->u.accept;
    check(rrpc__clc_encode_accept_v2(a, buf, sizeof(buf), &len) == 0, "encode v2 accept", __LINE__);
    check(rrpc__clc_decode(buf, len, &b) == 0, "re-decode v2 accept", __LINE__);
    const struct rrpc__clc_accept *c = &b.u.accept;
    check(c->type == a->type && c->first_contact == a->first_contact && c->qpn == a->qpn &&
              c->rkey == a->rkey && c->token == a->token && c->psn == a->psn &&
              c->ring_addr == a->ring_addr && memcmp(c->eid, a->eid, RRPC_CLC_EID_LEN) == 0,
          "v2 accept fields", __LINE__);
    if (a->has_fce)
      check(c->has_fce && c->os_type == a->os_type && c->release == a->release &&
                memcmp(c->hostname, a->hostname, RRPC_CLC_HOSTNAME_LEN) == 0 &&
                (a->type != RRPC_CLC_CONFIRM || c->gid_count == a->gid_count),
            "v2 first-contact fields", __LINE__);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct rrpc__clc_hdr h;
  struct rrpc__clc_msg m;
  struct rrpc__clc_proposal p;
  struct rrpc__clc_accept a;
  struct rrpc__clc_decline d;
  int rc, rp, ra, rd;

  rc = rrpc__clc_peek_header(data, size, &h);
  check(rc_ok(rc), "peek rc", __LINE__);
  if (rc == 0) check(h.length <= RRPC_CLC_MAX_LEN && h.type >= 1 && h.type <= 4, "hdr", __LINE__);

  rc = rrpc__clc_decode(data, size, &m);
  check(rc_ok(rc), "decode rc", __LINE__);
  rp = rrpc__clc_decode_proposal(data, size, &p);
  ra = rrpc__clc_decode_accept(data, size, &a);
  rd = rrpc__clc_decode_decline(data, size, &d);
  check(rc_ok(rp) && rc_ok(ra) && rc_ok(rd), "typed decode rc", __LINE__);
  if (rc != 0) {
    check(rp != 0 && ra != 0 && rd != 0, "typed decoder accepts what decode rejects", __LINE__);
    return 0;
  }
  check(m.hdr.length <= size, "message longer than input", __LINE__);
  /* Exactly one typed decoder agrees with the generic one. */
  check((rp == 0) + (ra == 0) + (rd == 0) == 1, "typed decoders disagree", __LINE__);

  /* Policy helpers and texts are total. */
  (void)rrpc__clc_decline_text(m.hdr.type == RRPC_CLC_DECLINE ? m.u.decline.diag : 0);
  (void)rrpc__clc_type_name(m.hdr.type);

  switch (m.hdr.type) {
    case RRPC_CLC_PROPOSAL:
      check(rp == 0 && memcmp(&p, &m.u.proposal, sizeof(p)) == 0, "proposal differs", __LINE__);
      check(p.ipv6_count <= RRPC_CLC_MAX_IPV6_PREFIXES && p.eid_count <= RRPC_CLC_MAX_EIDS,
            "proposal counts", __LINE__);
      (void)rrpc__clc_proposal_decline_code(&p);
      if (p.has_ip_area) proposal_roundtrip(&p);
      break;
    case RRPC_CLC_ACCEPT:
    case RRPC_CLC_CONFIRM:
      check(ra == 0 && memcmp(&a, &m.u.accept, sizeof(a)) == 0, "accept differs", __LINE__);
      check(a.gid_count <= RRPC_CLC_MAX_GIDS && a.qpn <= 0xffffff && a.psn <= 0xffffff,
            "accept ranges", __LINE__);
      (void)rrpc__clc_accept_decline_code(&a);
      (void)rrpc__clc_ring_size(a.ring_code);
      (void)rrpc__clc_mtu_bytes(a.mtu);
      accept_roundtrip(&a);
      break;
    default:
      check(rd == 0 && memcmp(&d, &m.u.decline, sizeof(d)) == 0, "decline differs", __LINE__);
      decline_roundtrip(&d);
      break;
  }
  v1_bytes_match(data, &m);
  v2_roundtrip(&m);
  return 0;
}
