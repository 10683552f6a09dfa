/* llc_answer.c - a single-link peer's answers to Linux's LLC requests. The
 * layouts of the answers are those the Linux 6.1 client sends (captures in
 * test/data/smc-r/): a response is the request's type and version with
 * flag 0x80. */
#include "transport/smc/llc_answer.h"

#include <string.h>

static void answer_confirm_link(const struct rrpc__llc_self *self, const struct rrpc__llc_msg *req,
                                struct rrpc__llc_msg *ans) {
  const struct rrpc__llc_confirm_link *q = &req->u.confirm_link;
  struct rrpc__llc_confirm_link *a = &ans->u.confirm_link;
  /* The request's "no RMBE eyecatcher" bits are echoed: this end's RMBs
   * have none either. */
  ans->flags = (uint8_t)(RRPC_LLC_FLAG_RESP | (req->flags & RRPC_LLC_FLAG_NO_RMBE_EYEC));
  memcpy(a->mac, self->mac, sizeof a->mac);
  memcpy(a->gid, self->gid, sizeof a->gid);
  a->qpn = self->qpn & 0xffffffu;
  a->link_num = q->link_num;
  memcpy(a->link_uid, q->link_uid, sizeof a->link_uid);
  a->max_links = q->max_links;
}

/* A reject echoes the request's first 44 bytes (the sender's identity, not
 * ours) and drops its v2 extension. Linux 6.1 loses the v2 reject reason to
 * the length field, so only v1 carries one. */
static void answer_add_link(const struct rrpc__llc_msg *req, struct rrpc__llc_msg *ans) {
  ans->u.add_link = req->u.add_link;
  ans->u.add_link.has_v2_ext = 0;
  ans->u.add_link.v2_direct = 0;
  memset(ans->u.add_link.client_target_gid, 0, sizeof ans->u.add_link.client_target_gid);
  ans->u.add_link.num_rkeys = 0;
  ans->u.add_link.rej_rsn = req->version == 1 ? RRPC_LLC_REJ_NO_ALT_PATH : 0;
  ans->flags = RRPC_LLC_FLAG_RESP | RRPC_LLC_FLAG_ADD_LINK_REJ;
}

/* Every rkey the peer deletes is forgotten at once (its RMB is its own
 * business): the answer says one deletion, none failed. */
static void answer_delete_rkey(struct rrpc__llc_msg *ans) {
  memset(&ans->u.delete_rkey, 0, sizeof ans->u.delete_rkey);
  ans->u.delete_rkey.num_rkeys = 1;
  ans->u.delete_rkey.rkey_count = ans->version == 1 ? RRPC_LLC_DELETE_RKEY_V1_MAX : 1;
  ans->flags = RRPC_LLC_FLAG_RESP;
}

enum rrpc__llc_outcome rrpc__llc_answer(const struct rrpc__llc_self *self,
                                        const struct rrpc__llc_msg *req,
                                        struct rrpc__llc_msg *ans, int *send) {
  *send = 0;
  if (req->flags & RRPC_LLC_FLAG_RESP) return RRPC_LLC_IGNORE;
  memset(ans, 0, sizeof *ans);
  ans->type = req->type;
  ans->version = req->version;
  switch (req->type) {
    case RRPC_LLC_CONFIRM_LINK:
      answer_confirm_link(self, req, ans);
      *send = 1;
      return RRPC_LLC_CONFIRMED;
    case RRPC_LLC_ADD_LINK:
      answer_add_link(req, ans);
      *send = 1;
      return RRPC_LLC_ANSWER;
    case RRPC_LLC_TEST_LINK:
    case RRPC_LLC_CONFIRM_RKEY:
      /* The peer's new RMB on this link is accepted as announced. */
      ans->u = req->u;
      ans->flags = RRPC_LLC_FLAG_RESP;
      *send = 1;
      return RRPC_LLC_ANSWER;
    case RRPC_LLC_DELETE_RKEY:
      answer_delete_rkey(ans);
      *send = 1;
      return RRPC_LLC_ANSWER;
    case RRPC_LLC_DELETE_LINK:
      /* "All links" (what Linux sends for a one-link group) gets no
       * response: the group is gone. A single-link deletion is confirmed. */
      if (!(req->flags & RRPC_LLC_FLAG_DEL_LINK_ALL)) {
        ans->u.delete_link = req->u.delete_link;
        ans->flags = RRPC_LLC_FLAG_RESP;
        *send = 1;
      }
      return RRPC_LLC_LINK_DOWN;
    default:
      return RRPC_LLC_IGNORE;
  }
}
