// test/kernel-smc/rrpc_smc_server.c - rrpc's SMC-Rv2 server (rrpc/smc_stream.h) for
// kernel AF_SMC clients (smc_pingpong client): the listener is marked so that its SYN-ACK
// carries SMC's TCP option when the client's SYN did (preload/bpf's sock_ops program), then
// per connection the v2 CLC exchange as the link group's server, LLC CONFIRM_LINK, and
// smc_pingpong's protocol served over the cursor data path: a 16-byte header ("SMPP", size,
// rounds, index), then each SIZE-byte message echoed. Connections are served one at a time;
// all but the last keep the link, so the kernel client's next connection reuses its link group.
//   rrpc_smc_server [--port P] [--conns N] [--ready FILE] [--gid-index I] [--netdev N]
//                   [--smc_ueid EID[,EID]] [--smc_pnet NETDEV=IBDEV[:PORT]] [--timeout-ms T]
// The RDMA device is --smc_pnet's for the netdev, the UEIDs accepted --smc_ueid's.
// Output per connection: "served conn=N size=S rounds=R", "conn N: started a / reused the link
// group", the link line, the close line.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "preload/bpf/smc_opt.h"
#include "rrpc/rdma.h"
#include "rrpc/smc_stream.h"
#include "transport/smc/llc.h"

enum { HDR_LEN = 16, MAX_SIZE = 16 << 20 };

static uint32_t get_be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int read_full(rrpc_smc_stream *s, uint8_t *buf, size_t len) {
  while (len > 0) {
    long n = rrpc_smc_stream_read(s, buf, len);
    if (n == 0) return -EPIPE;
    if (n < 0) return (int)n;
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

static int serve(rrpc_smc_stream *s, unsigned conn) {
  uint8_t hdr[HDR_LEN];
  int rc = read_full(s, hdr, HDR_LEN);
  if (rc != 0) return rc;
  uint32_t size = get_be32(hdr + 4), rounds = get_be32(hdr + 8);
  if (memcmp(hdr, "SMPP", 4) != 0 || size == 0 || size > MAX_SIZE) return -EBADMSG;
  uint8_t *buf = malloc(size);
  if (buf == NULL) return -ENOMEM;
  for (uint32_t r = 0; rc == 0 && r < rounds; r++) {
    rc = read_full(s, buf, size);
    if (rc == 0) rc = rrpc_smc_stream_write(s, buf, size);
  }
  free(buf);
  if (rc == 0) printf("served conn=%u size=%u rounds=%u\n", conn, size, rounds);
  return rc;
}

static void print_link(const struct rrpc_smc_stream_stats *st) {
  printf("link: my_qpn=0x%06x kernel_qpn=0x%06x llc_rx confirm_link=%u add_link=%u "
         "test_link=%u confirm_rkey=%u delete_rkey=%u delete_link=%u cdc_rx=%u cdc_tx=%u bytes_rx=%llu "
         "bytes_tx=%llu\n",
         st->my_qpn, st->kernel_qpn, st->llc_rx[RRPC_LLC_CONFIRM_LINK],
         st->llc_rx[RRPC_LLC_ADD_LINK], st->llc_rx[RRPC_LLC_TEST_LINK],
         st->llc_rx[RRPC_LLC_CONFIRM_RKEY], st->llc_rx[RRPC_LLC_DELETE_RKEY], st->llc_rx[RRPC_LLC_DELETE_LINK], st->cdc_rx,
         st->cdc_tx, (unsigned long long)st->bytes_rx, (unsigned long long)st->bytes_tx);
}

static int listen_marked(int port) {
  int rc = rrpc_smcopt_enable();
  if (rc != 0) {
    printf("smcopt: cannot put TCP option 254 in the SYN-ACK (%s)\n", strerror(-rc));
    return rc;
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  if (fd < 0) return -errno;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (rrpc_smcopt_mark(fd) != 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      listen(fd, 8) != 0) {
    rc = -errno;
    close(fd);
    return rc ? rc : -EINVAL;
  }
  return fd;
}

static int serve_conn(int cfd, unsigned conn, const struct rrpc_smc_stream_opts *ks, int keep_link) {
  if (rrpc_smcopt_peer_offered(cfd) != 1) {
    fprintf(stderr, "rrpc_smc_server: conn %u: the client's SYN had no SMC option\n", conn);
    return -EPROTO;
  }
  rrpc_smc_stream *s = NULL;
  uint32_t declined = 0;
  int rc = rrpc_smc_stream_accept(cfd, ks, &s, &declined);
  if (rc == -ECONNREFUSED) fprintf(stderr, "rrpc_smc_server: declined 0x%08x\n", declined);
  if (rc != 0) return rc;
  rc = serve(s, conn);
  // The kernel client closes after its last read; our close answers its close CDC.
  struct rrpc_smc_stream_stats st;
  int crc = rrpc_smc_stream_close(s, &st, keep_link);
  printf("conn %u: %s link group\n", conn, st.reused ? "reused the" : "started a");
  print_link(&st);
  printf("close: %s\n", crc == 0 ? "peer's close CDC received" : strerror(-crc));
  return rc != 0 ? rc : crc;
}

int main(int argc, char **argv) {
  struct rrpc_smc_stream_opts ks = {.ibdev = NULL, .gid_index = 1, .netdev = "eth0",
                                    .ueids = NULL, .ring_code = 2, .timeout_ms = 30000};
  int port = 7400;
  unsigned conns = 1;
  const char *ready = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *a = argv[i], *v = argv[i + 1];
    if (!strcmp(a, "--port")) port = atoi(v);
    else if (!strcmp(a, "--conns")) conns = (unsigned)atoi(v);
    else if (!strcmp(a, "--ready")) ready = v;
    else if (!strcmp(a, "--gid-index")) ks.gid_index = atoi(v);
    else if (!strcmp(a, "--netdev")) ks.netdev = v;
    else if (!strcmp(a, "--smc_ueid") || !strcmp(a, "--smc_pnet")) {
      const char *why = NULL;
      int rc = a[6] == 'u' ? rrpc_smc_set_ueids(v, &why) : rrpc_smc_set_pnet(v, &why);
      if (rc != 0) return fprintf(stderr, "rrpc_smc_server: %s: %s\n", a, why), 2;
    }
    else if (!strcmp(a, "--timeout-ms")) ks.timeout_ms = atoi(v);
    else return fprintf(stderr, "rrpc_smc_server: unknown option %s\n", a), 2;
  }
  if (argc % 2 == 0) return fprintf(stderr, "rrpc_smc_server: an option lacks its value\n"), 2;
  alarm(300);
  int lfd = listen_marked(port);
  if (lfd < 0) return fprintf(stderr, "rrpc_smc_server: listen: %s\n", strerror(-lfd)), 1;
  if (ready != NULL) {
    FILE *f = fopen(ready, "w");
    if (f == NULL || fclose(f) != 0) return perror("rrpc_smc_server: ready file"), 1;
  }
  int status = 0;
  for (unsigned c = 0; c < conns; c++) {
    int cfd = accept(lfd, NULL, NULL);
    if (cfd < 0) return perror("rrpc_smc_server: accept"), 1;
    // The link stays for the next connection: the kernel client reuses its link group.
    int rc = serve_conn(cfd, c, &ks, c + 1 < conns);
    close(cfd);
    if (rc != 0) {
      fprintf(stderr, "rrpc_smc_server: conn %u: %s\n", c, strerror(-rc));
      status = 1;
    }
  }
  rrpc_smc_stream_end_parked();
  close(lfd);
  return status;
}
