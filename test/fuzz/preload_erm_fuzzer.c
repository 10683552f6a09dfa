/* preload_erm_fuzzer - what ERM's socket API (rrpc/erm.h) takes from a
 * program under rrpc-run (preload/erm_parse.h): the SMC_ERM_CMD option's
 * value and sendmsg's control messages, and the completions it writes into
 * recvmsg's control buffer. The first byte picks which; the rest is copied
 * into a buffer of its exact size so ASan sees any read past it. Each
 * answer is checked against what the header promises. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "preload/erm_parse.h"

static void check_mr(const uint8_t *v, size_t n) {
  struct smc_erm_mr m;
  memset(&m, 0xa5, sizeof m);
  int rc = rrpc_run_erm_mr_parse(v, n, &m);
  if (rc != 0) {
    if (rc != (v == NULL ? -EFAULT : -EINVAL)) abort();
    return;
  }
  if (n != sizeof m || memcmp(&m, v, sizeof m) != 0 || m.reserved != 0) abort();
  if (m.cmd == SMC_ERM_REG_MR) {
    if (m.access & ~3u) abort();
    if (m.addr == 0 || m.len == 0 || m.addr + m.len < m.addr) abort();
  } else if (m.cmd != SMC_ERM_DEREG_MR || m.memid == 0) {
    abort();
  }
}

/* A walk of its own with the libc macros' arithmetic: every accepted
 * control buffer holds whole headers inside it, and the COPYs found are
 * the SOL_SMC ones in order. */
static void check_copies(const uint8_t *ctl, size_t n, int max) {
  struct smc_erm_copy out[8];
  int rc = rrpc_run_erm_copies_parse(ctl, n, out, max);
  if (rc < 0) {
    if (rc != -EINVAL) abort();
    return;
  }
  if (rc > max) abort();
  size_t off = 0;
  int k = 0;
  while (n - off >= sizeof(struct cmsghdr)) {
    struct cmsghdr h;
    memcpy(&h, ctl + off, sizeof h);
    if (h.cmsg_len < sizeof h || h.cmsg_len > n - off) abort();
    if (h.cmsg_level == SOL_SMC) {
      if (h.cmsg_type != SMC_ERM_CMD_COPY || h.cmsg_len != CMSG_LEN(sizeof out[0]) || k >= rc) abort();
      if (memcmp(&out[k], ctl + off + CMSG_LEN(0), sizeof out[0]) != 0) abort();
      if (out[k].flags & ~SMC_ERM_REMOTE_COMPL) abort();
      k++;
    }
    if (CMSG_ALIGN(h.cmsg_len) > n - off) break;
    off += CMSG_ALIGN(h.cmsg_len);
  }
  if (k != rc) abort();
}

/* Completions out of the input's bytes into a buffer of the size it says;
 * read back with the libc macros. */
static void check_compl(const uint8_t *d, size_t n) {
  if (n < 2) return;
  size_t cap = (size_t)d[0] * 4 + d[1];
  d += 2;
  n -= 2;
  size_t cnt = n / sizeof(struct smc_erm_compl);
  struct smc_erm_compl *c = malloc(cnt * sizeof *c + 1);
  unsigned char *buf = malloc(cap + 1);
  if (c == NULL || buf == NULL) abort();
  memcpy(c, d, cnt * sizeof *c);
  size_t used = 12345;
  size_t k = rrpc_run_erm_compl_put(buf, cap, c, cnt, &used);
  if (k > cnt || used > cap || used != k * CMSG_SPACE(sizeof *c)) abort();
  if (k < cnt && cap - used >= CMSG_SPACE(sizeof *c)) abort();
  struct msghdr mh = {.msg_control = buf, .msg_controllen = used};
  size_t j = 0;
  if (used > 0) {
    /* CMSG_* need alignment: read from an aligned copy. */
    void *al = aligned_alloc(16, (used + 15) / 16 * 16);
    if (al == NULL) abort();
    memcpy(al, buf, used);
    mh.msg_control = al;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h != NULL; h = CMSG_NXTHDR(&mh, h), j++) {
      if (h->cmsg_level != SOL_SMC || h->cmsg_type != SMC_ERM_CMD_COMPL || h->cmsg_len != CMSG_LEN(sizeof *c))
        abort();
      if (j >= k || memcmp(CMSG_DATA(h), &c[j], sizeof *c) != 0) abort();
    }
    free(al);
  }
  if (j != k) abort();
  free(c);
  free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  size_t n = size - 1;
  uint8_t *v = malloc(n + 1);
  if (v == NULL) abort();
  memcpy(v, data + 1, n);
  switch (data[0] % 3) {
    case 0: check_mr(n ? v : NULL, n); break;
    case 1: check_copies(n ? v : NULL, n, 1 + (data[0] >> 2) % 8); break;
    default: check_compl(v, n); break;
  }
  free(v);
  return 0;
}
