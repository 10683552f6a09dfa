/* erm_parse.c - ERM's option value and control messages (erm_parse.h). */
#include "preload/erm_parse.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

int rrpc_run_erm_mr_parse(const void *val, size_t len, struct smc_erm_mr *out) {
  if (val == NULL || out == NULL) return -EFAULT;
  if (len != sizeof *out) return -EINVAL;
  struct smc_erm_mr m;
  memcpy(&m, val, sizeof m);
  if (m.reserved != 0) return -EINVAL;
  if (m.cmd == SMC_ERM_DEREG_MR) {
    if (m.memid == 0) return -EINVAL;
  } else if (m.cmd == SMC_ERM_REG_MR) {
    if ((m.access & ~(SMC_ERM_ACCESS_REMOTE_READ | SMC_ERM_ACCESS_REMOTE_WRITE)) != 0) return -EINVAL;
    if (m.addr == 0 || m.len == 0 || m.addr + m.len < m.addr) return -EINVAL;
    if ((uintptr_t)m.addr != m.addr || (size_t)m.len != m.len) return -EINVAL;
  } else {
    return -EINVAL;
  }
  *out = m;
  return 0;
}

int rrpc_run_erm_copies_parse(const void *control, size_t controllen, struct smc_erm_copy *out, int max) {
  const unsigned char *p = control;
  size_t off = 0;
  int n = 0, other = 0;
  if (control == NULL) return controllen == 0 ? 0 : -EINVAL;
  while (controllen - off >= sizeof(struct cmsghdr)) {
    struct cmsghdr h;
    memcpy(&h, p + off, sizeof h);
    if (h.cmsg_len < sizeof h || h.cmsg_len > controllen - off) return -EINVAL;
    if (h.cmsg_level == SOL_SMC) {
      if (h.cmsg_type != SMC_ERM_CMD_COPY || h.cmsg_len != CMSG_LEN(sizeof(struct smc_erm_copy))) return -EINVAL;
      if (n >= max) return -EINVAL;
      struct smc_erm_copy c;
      memcpy(&c, p + off + CMSG_LEN(0), sizeof c);
      if ((c.flags & ~SMC_ERM_REMOTE_COMPL) != 0) return -EINVAL;
      if (out != NULL) out[n] = c;
      n++;
    } else {
      other = 1;
    }
    size_t step = CMSG_ALIGN(h.cmsg_len);
    if (step > controllen - off) break; /* the last one's padding may be missing */
    off += step;
  }
  if (n > 0 && other) return -EINVAL;
  return n;
}

size_t rrpc_run_erm_compl_put(void *control, size_t cap, const struct smc_erm_compl *c, size_t n, size_t *used) {
  unsigned char *p = control;
  size_t off = 0, k = 0;
  const size_t one = CMSG_SPACE(sizeof *c);
  for (; k < n && p != NULL && cap - off >= one; k++) {
    struct cmsghdr h = {.cmsg_len = CMSG_LEN(sizeof *c), .cmsg_level = SOL_SMC, .cmsg_type = SMC_ERM_CMD_COMPL};
    memset(p + off, 0, one);
    memcpy(p + off, &h, sizeof h);
    memcpy(p + off + CMSG_LEN(0), &c[k], sizeof *c);
    off += one;
  }
  if (used != NULL) *used = off;
  return k;
}
