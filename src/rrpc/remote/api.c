/* remote/api.c - the public calls of rrpc/remote.h that need no connection. */
#include <errno.h>

#include "rrpc/remote.h"
#include "rrpc/remote/wire.h"

_Static_assert((int)RRPC_REMOTE_TOKEN_LEN == (int)RRPC_RMT_TOKEN_LEN, "token sizes agree");
_Static_assert((int)(RRPC_REMOTE_READ | RRPC_REMOTE_WRITE) == (int)RRPC_RMT_RIGHTS_ALL, "rights agree");

int rrpc_remote_token_inspect(const void *buf, size_t len, rrpc_remote_token_info *out) {
  struct rrpc__rmt_token t;
  int rc;
  if (!buf || !out) return -EINVAL;
  rc = rrpc__rmt_token_decode(buf, len, &t);
  if (rc) return rc;
  out->id = t.id;
  out->generation = t.generation;
  out->conn_id = t.conn_id;
  out->length = t.length;
  out->rights = t.rights;
  return 0;
}
