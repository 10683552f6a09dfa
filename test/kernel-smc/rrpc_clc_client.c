// test/kernel-smc/rrpc_clc_client.c - rrpc's client half of the SMC-Rv2 CLC exchange against a
// kernel AF_SMC server (smc_pingpong server), then smc_pingpong's 64-byte ping-pong over TCP.
//
// The SYN carries SMC's TCP option (kind 254) through preload/bpf's sock_ops program; without
// the privilege to load it the client says so once and speaks plain TCP. When the server's
// SYN-ACK echoed the option, the client sends a v2 Proposal (RoCEv2 GID of --gid-dev, the
// UEIDs of --ueid) and reads the kernel's answer:
// - a Decline: the kernel already fell back; the reason is counted and printed;
// - an Accept: rrpc cannot yet bring up the LLC link a Confirm promises, so it declines with
//   its own reason (the kernel counts the fallback as "peer declined") and both sides go on
//   over TCP.
// Output: one "clc: ..." line, then "tcp: rounds=N ok" after the byte-exact ping-pong.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "preload/bpf/smc_opt.h"
#include "transport/smc/clc.h"
#include "transport/smc/smc_config.h"

enum { HDR_LEN = 16, SIZE = 64, IO_TIMEOUT_S = 30 };

struct counts {
  unsigned declines_received; // the kernel declined our Proposal
  unsigned declines_sent;     // we declined the kernel's Accept
  uint32_t last_reason;
};

static int write_full(int fd, const void *buf, size_t len) {
  const uint8_t *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -errno;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int read_full(int fd, void *buf, size_t len) {
  uint8_t *p = buf;
  while (len > 0) {
    ssize_t n = read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return -ECONNRESET;
    if (n < 0) return -errno;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

// The GID at index `idx` of IB device `dev` port 1, from sysfs ("xxxx:xxxx:...").
static int read_gid(const char *dev, int idx, uint8_t gid[16]) {
  char path[256], text[64];
  snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/1/gids/%d", dev, idx);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -errno;
  int ok = fgets(text, sizeof text, f) != NULL;
  fclose(f);
  if (!ok) return -EIO;
  unsigned w[8];
  if (sscanf(text, "%x:%x:%x:%x:%x:%x:%x:%x", &w[0], &w[1], &w[2], &w[3], &w[4], &w[5], &w[6],
             &w[7]) != 8)
    return -EINVAL;
  for (int i = 0; i < 8; i++) {
    gid[2 * i] = (uint8_t)(w[i] >> 8);
    gid[2 * i + 1] = (uint8_t)w[i];
  }
  return 0;
}

static int send_proposal(int fd, const char *gid_dev, int gid_idx, const char *ueids) {
  struct rrpc__smc_config cfg;
  const char *why = NULL;
  memset(&cfg, 0, sizeof cfg);
  if (rrpc__smc_parse_ueids(ueids, &cfg, &why) != 0) {
    fprintf(stderr, "rrpc_clc_client: --ueid: %s\n", why);
    return -EINVAL;
  }
  struct rrpc__clc_proposal p;
  memset(&p, 0, sizeof p);
  p.peer_id[0] = (uint8_t)getpid();
  p.peer_id[1] = (uint8_t)(getpid() >> 8);
  p.has_v2_ext = 1;
  p.v2_release = 1; // SMC v2.1, what 6.1 offers
  p.max_conns = 255;
  p.max_links = 3;
  int rc = read_gid(gid_dev, gid_idx, p.roce_v2_gid);
  if (rc != 0) {
    fprintf(stderr, "rrpc_clc_client: GID %d of %s: %s\n", gid_idx, gid_dev, strerror(-rc));
    return rc;
  }
  p.eid_count = cfg.ueid_count;
  for (unsigned i = 0; i < cfg.ueid_count; i++) memcpy(p.eids[i], cfg.ueids[i], RRPC_CLC_EID_LEN);
  uint8_t buf[RRPC_CLC_MAX_LEN];
  size_t len = 0;
  rc = rrpc__clc_encode_proposal_v2(&p, buf, sizeof buf, &len);
  return rc != 0 ? rc : write_full(fd, buf, len);
}

// Reads the kernel's answer to the Proposal; declines an Accept. 0 when the connection is left
// as plain TCP (either way), negative on an I/O or parse failure.
static int clc_answer(int fd, struct counts *c) {
  uint8_t buf[RRPC_CLC_MAX_LEN];
  struct rrpc__clc_hdr hdr;
  int rc = read_full(fd, buf, 8);
  if (rc == 0) rc = rrpc__clc_peek_header(buf, 8, &hdr);
  if (rc == 0) rc = read_full(fd, buf + 8, (size_t)hdr.length - 8);
  struct rrpc__clc_msg m;
  if (rc == 0) rc = rrpc__clc_decode(buf, hdr.length, &m);
  if (rc != 0) return rc;
  if (m.hdr.type == RRPC_CLC_DECLINE) {
    c->declines_received++;
    c->last_reason = m.u.decline.diag;
    printf("clc: kernel declined v%u diag=0x%08x; fallback to TCP\n", m.hdr.version,
           m.u.decline.diag);
    return 0;
  }
  if (m.hdr.type != RRPC_CLC_ACCEPT) return -EPROTO;
  const struct rrpc__clc_accept *a = &m.u.accept;
  printf("clc: kernel accepted v%u len=%u first_contact=%u qpn=%u mtu=%u eid=%.32s\n",
         m.hdr.version, m.hdr.length, a->first_contact, a->qpn, a->mtu, (const char *)a->eid);
  // A Confirm promises an LLC link this client cannot bring up yet: decline instead.
  struct rrpc__clc_decline d;
  memset(&d, 0, sizeof d);
  d.diag = RRPC_CLC_DECL_ERR_RDYLNK;
  d.out_of_sync = 0;
  d.os_type = 2;
  size_t len = 0;
  rc = rrpc__clc_encode_decline_v2(&d, buf, sizeof buf, &len);
  if (rc == 0) rc = write_full(fd, buf, len);
  if (rc != 0) return rc;
  c->declines_sent++;
  c->last_reason = d.diag;
  printf("clc: declined the Accept diag=0x%08x (no LLC yet); fallback to TCP\n", d.diag);
  return 0;
}

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

static int pingpong(int fd, uint32_t rounds) {
  uint8_t hdr[HDR_LEN], out[SIZE], in[SIZE];
  memcpy(hdr, "SMPP", 4);
  put_be32(hdr + 4, SIZE);
  put_be32(hdr + 8, rounds);
  put_be32(hdr + 12, 0);
  int rc = write_full(fd, hdr, HDR_LEN);
  for (uint32_t r = 0; rc == 0 && r < rounds; r++) {
    for (int i = 0; i < SIZE; i++) out[i] = (uint8_t)(r * 31u + (unsigned)i);
    rc = write_full(fd, out, SIZE);
    if (rc == 0) rc = read_full(fd, in, SIZE);
    if (rc == 0 && memcmp(in, out, SIZE) != 0) rc = -EBADMSG;
  }
  return rc;
}

int main(int argc, char **argv) {
  const char *addr = "10.99.0.1", *gid_dev = "rxe0", *ueids = "";
  int port = 7400, gid_idx = 1;
  uint32_t rounds = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--addr")) addr = argv[i + 1];
    else if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--gid-dev")) gid_dev = argv[i + 1];
    else if (!strcmp(argv[i], "--gid-index")) gid_idx = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--ueid")) ueids = argv[i + 1];
    else if (!strcmp(argv[i], "--rounds")) rounds = (uint32_t)atoi(argv[i + 1]);
    else {
      fprintf(stderr, "usage: rrpc_clc_client [--addr A] [--port P] [--gid-dev D] "
                      "[--gid-index I] [--ueid EID[,EID]] [--rounds N]\n");
      return 2;
    }
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return perror("socket"), 1;
  struct timeval tv = {IO_TIMEOUT_S, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int rc = rrpc_smcopt_enable();
  if (rc == 0) rc = rrpc_smcopt_mark(fd);
  if (rc != 0)
    printf("smcopt: cannot put TCP option 254 in the SYN (%s); plain TCP\n", strerror(-rc));
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) return fprintf(stderr, "bad --addr\n"), 2;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) return perror("connect"), 1;
  struct counts c = {0};
  int offered = rc == 0 ? rrpc_smcopt_peer_offered(fd) : -1;
  printf("smcopt: syn marked=%d, server's SYN-ACK echoed=%d\n", rc == 0, offered);
  if (offered == 1) {
    rc = send_proposal(fd, gid_dev, gid_idx, ueids);
    if (rc == 0) rc = clc_answer(fd, &c);
    if (rc != 0) {
      fprintf(stderr, "rrpc_clc_client: CLC: %s\n", strerror(rc < 0 ? -rc : rc));
      return 1;
    }
  }
  printf("counts: declines_received=%u declines_sent=%u last_reason=0x%08x\n",
         c.declines_received, c.declines_sent, c.last_reason);
  rc = pingpong(fd, rounds);
  if (rc != 0) return fprintf(stderr, "pingpong: %s\n", strerror(-rc)), 1;
  printf("tcp: rounds=%u size=%d ok\n", rounds, SIZE);
  close(fd);
  return 0;
}
