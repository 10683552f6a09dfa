// test/kernel-smc/rrpc_smc_client.c - rrpc's SMC-Rv2 client (rrpc/smc_stream.h)
// against a kernel AF_SMC server (smc_pingpong server): SMC's TCP option in the SYN
// (preload/bpf), the v2 CLC exchange, a QP and RMB of its own, LLC CONFIRM_LINK, then
// smc_pingpong's protocol (16-byte header, SIZE-byte messages echoed ROUNDS times, compared
// byte for byte) over the cursor data path. Output: "smcr: ok size=... rtt_us=... MBps=...",
// then one "link: ..." line with what the link did.
//   rrpc_smc_client --addr A [--port P] [--size S] [--rounds R] [--ibdev D] [--gid-index I]
//                   [--netdev N] [--smc_ueid EID[,EID]] [--smc_pnet NETDEV=IBDEV[:PORT]]
//                   [--expect-peer-death] [--expect-eof] [--half-close]
// The stream's RDMA device and UEIDs come from --smc_pnet / --smc_ueid (rrpc's SMC config, as
// the flags of that name set it); --ibdev only names the device whose rdma resources are
// counted before and after.
//                   [--idle-ms T] [--timeout-ms T]
// --expect-peer-death: the server dies in mid-stream; pass only on EOF or reset ("peer-gone").
// --idle-ms T: after the first round the link idles until the kernel's second TEST_LINK (both
// answered; the second comes only if the kernel took the first answer) or T ms ("idle: test_link=N"); the rounds then go on over the same link.
// --expect-eof: after the last round the server's orderly close must arrive ("peer-close: eof")
// before this side closes.
// --half-close: after its last message the client shuts its writing down
// (rrpc_smc_stream_shutdown, the server reads EOF: smc_pingpong server --half-close), then
// reads the echo and the server's close ("half-close: ..."); a write after it must be refused.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "preload/bpf/smc_opt.h"
#include "rrpc/rdma.h"
#include "rrpc/smc_stream.h"
#include "transport/smc/llc.h"

enum { HDR_LEN = 16, MAX_SIZE = 16 << 20 };

struct opts {
  const char *addr;
  const char *res_dev; // whose rdma resources are counted
  int port, expect_death, expect_eof, half_close, idle_ms;
  size_t size;
  uint32_t rounds;
  struct rrpc_smc_stream_opts ks;
};

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

// A pattern that differs per round and across 4 KiB pages, so a misplaced echo shows.
static uint8_t pattern(uint32_t round, size_t i) { return (uint8_t)(round * 131u + i * 7u + (i >> 12)); }

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

// Half close after the last message: the kernel server reads EOF; writing is refused from now.
static int shut_down(rrpc_smc_stream *s) {
  int rc = rrpc_smc_stream_shutdown(s);
  if (rc != 0) return rc;
  uint8_t b = 0;
  rc = rrpc_smc_stream_write(s, &b, 1);
  if (rc != -EPIPE) {
    fprintf(stderr, "rrpc_smc_client: a write after shutdown gave %d, not -EPIPE\n", rc);
    return -EPROTO;
  }
  return 0;
}

static int rounds(rrpc_smc_stream *s, const struct opts *o, uint8_t *out, uint8_t *in) {
  uint8_t hdr[HDR_LEN];
  memcpy(hdr, "SMPP", 4);
  put_be32(hdr + 4, (uint32_t)o->size);
  put_be32(hdr + 8, o->rounds);
  put_be32(hdr + 12, 0);
  int rc = rrpc_smc_stream_write(s, hdr, HDR_LEN);
  for (uint32_t r = 0; rc == 0 && r < o->rounds; r++) {
    for (size_t i = 0; i < o->size; i++) out[i] = pattern(r, i);
    rc = rrpc_smc_stream_write(s, out, o->size);
    if (rc == 0 && o->half_close && r + 1 == o->rounds) rc = shut_down(s);
    if (rc == 0) rc = read_full(s, in, o->size);
    if (rc != 0 && o->expect_death && (rc == -EPIPE || rc == -ECONNRESET)) {
      printf("peer-gone round=%u how=%s\n", r, rc == -EPIPE ? "eof" : "reset");
      return 0;
    }
    if (rc == 0 && memcmp(in, out, o->size) != 0) {
      size_t i = 0;
      while (in[i] == out[i]) i++;
      fprintf(stderr, "rrpc_smc_client: round %u: byte %zu differs\n", r, i);
      return -EBADMSG;
    }
    if (rc == 0 && r == 0 && o->idle_ms > 0)
      printf("idle: test_link=%u\n", rrpc_smc_stream_await_test_link(s, 2, o->idle_ms));
  }
  if (rc == 0 && o->expect_death) {
    fprintf(stderr, "rrpc_smc_client: the peer did not die\n");
    return -EPROTO;
  }
  if (rc == 0 && o->expect_eof) {
    // The server closes after its last echo: the next read must say so.
    uint8_t extra;
    long n = rrpc_smc_stream_read(s, &extra, 1);
    if (n != 0) {
      fprintf(stderr, "rrpc_smc_client: after the last round: %s\n",
              n > 0 ? "more bytes" : strerror((int)-n));
      return n > 0 ? -EPROTO : (int)n;
    }
    printf("peer-close: eof\n");
  }
  if (rc == 0 && o->half_close)
    printf("half-close: shut down after %u x %zu bytes, the echo read byte-exact, then the "
           "server's close\n", o->rounds, o->size);
  return rc;
}

static void print_link(const struct rrpc_smc_stream_stats *st) {
  printf("link: my_qpn=0x%06x kernel_qpn=0x%06x llc_rx confirm_link=%u add_link=%u "
         "test_link=%u confirm_rkey=%u delete_rkey=%u delete_link=%u cdc_rx=%u cdc_tx=%u "
         "bytes_tx=%llu bytes_rx=%llu write_blocked=%u\n",
         st->my_qpn, st->kernel_qpn, st->llc_rx[RRPC_LLC_CONFIRM_LINK],
         st->llc_rx[RRPC_LLC_ADD_LINK], st->llc_rx[RRPC_LLC_TEST_LINK],
         st->llc_rx[RRPC_LLC_CONFIRM_RKEY], st->llc_rx[RRPC_LLC_DELETE_RKEY],
         st->llc_rx[RRPC_LLC_DELETE_LINK], st->cdc_rx, st->cdc_tx,
         (unsigned long long)st->bytes_tx, (unsigned long long)st->bytes_rx, st->write_blocked);
}

// The device's object counts ("pd N cq N qp N ... mr N ...") as `rdma resource show` says, or
// "?" when it cannot be read. Read by this process while it lives: objects it forgot to free
// would still count (they die with the process only).
static void device_resources(const char *ibdev, char *out, size_t cap) {
  snprintf(out, cap, "?");
  FILE *f = popen("rdma resource show 2>/dev/null", "r");
  if (f == NULL) return;
  char line[256], key[64];
  snprintf(key, sizeof key, " %s: ", ibdev);
  while (fgets(line, sizeof line, f) != NULL) {
    char *at = strstr(line, key);
    if (at == NULL) continue;
    snprintf(out, cap, "%s", at + strlen(key));
    out[strcspn(out, "\n")] = 0;
  }
  pclose(f);
}

static int parse(int argc, char **argv, struct opts *o) {
  *o = (struct opts){.addr = "10.99.0.1", .port = 7400, .size = 64, .rounds = 20,
                     .res_dev = "rxe0",
                     .ks = {.ibdev = NULL, .gid_index = 1, .netdev = "eth0", .ueids = NULL,
                            .ring_code = 2, .timeout_ms = 30000}};
  const char *why = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--expect-peer-death")) { o->expect_death = 1; continue; }
    if (!strcmp(a, "--expect-eof")) { o->expect_eof = 1; continue; }
    if (!strcmp(a, "--half-close")) { o->half_close = o->expect_eof = 1; continue; }
    if (v == NULL) return -1;
    i++;
    if (!strcmp(a, "--addr")) o->addr = v;
    else if (!strcmp(a, "--port")) o->port = atoi(v);
    else if (!strcmp(a, "--size")) o->size = strtoul(v, NULL, 0);
    else if (!strcmp(a, "--rounds")) o->rounds = (uint32_t)strtoul(v, NULL, 0);
    else if (!strcmp(a, "--ibdev")) o->res_dev = v;
    else if (!strcmp(a, "--gid-index")) o->ks.gid_index = atoi(v);
    else if (!strcmp(a, "--netdev")) o->ks.netdev = v;
    else if (!strcmp(a, "--smc_ueid") && rrpc_smc_set_ueids(v, &why) != 0) return -1;
    else if (!strcmp(a, "--smc_pnet") && rrpc_smc_set_pnet(v, &why) != 0) return -1;
    else if (!strcmp(a, "--smc_ueid") || !strcmp(a, "--smc_pnet")) continue;
    else if (!strcmp(a, "--timeout-ms")) o->ks.timeout_ms = atoi(v);
    else if (!strcmp(a, "--idle-ms")) o->idle_ms = atoi(v);
    else return -1;
  }
  return o->size == 0 || o->size > MAX_SIZE || o->rounds == 0 ? -1 : 0;
}

static int connect_tcp(const struct opts *o) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -errno;
  int rc = rrpc_smcopt_enable();
  if (rc == 0) rc = rrpc_smcopt_mark(fd);
  if (rc != 0) {
    printf("smcopt: cannot put TCP option 254 in the SYN (%s)\n", strerror(-rc));
    close(fd);
    return -EPERM;
  }
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
  if (inet_pton(AF_INET, o->addr, &sa.sin_addr) != 1 ||
      connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    rc = -errno;
    close(fd);
    return rc ? rc : -EINVAL;
  }
  if (rrpc_smcopt_peer_offered(fd) != 1) {
    printf("smcopt: the server's SYN-ACK did not echo option 254\n");
    close(fd);
    return -EPROTO;
  }
  struct timeval tv = {60, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

int main(int argc, char **argv) {
  struct opts o;
  if (parse(argc, argv, &o) != 0) {
    fprintf(stderr, "usage: rrpc_smc_client --addr A [--port P] [--size S] [--rounds R] "
                    "[--ibdev D] [--gid-index I] [--netdev N] [--smc_ueid EIDS] [--smc_pnet N=D] "
                    "[--expect-peer-death] [--expect-eof] [--half-close] [--idle-ms T] [--timeout-ms T]\n");
    return 2;
  }
  alarm(300);
  uint8_t *out = malloc(o.size), *in = malloc(o.size);
  if (out == NULL || in == NULL) return 1;
  char res_before[256], res_after[256];
  device_resources(o.res_dev, res_before, sizeof res_before);
  double t0 = now_s();
  int fd = connect_tcp(&o);
  if (fd < 0) return fprintf(stderr, "rrpc_smc_client: connect: %s\n", strerror(-fd)), 1;
  rrpc_smc_stream *s = NULL;
  uint32_t decline = 0;
  int rc = rrpc_smc_stream_connect(fd, &o.ks, &s, &decline);
  if (rc == -ECONNREFUSED) return printf("smcr: kernel declined diag=0x%08x\n", decline), 1;
  if (rc != 0) return fprintf(stderr, "rrpc_smc_client: SMC-R setup: %s\n", strerror(-rc)), 1;
  double t1 = now_s();
  rc = rounds(s, &o, out, in);
  double t2 = now_s();
  struct rrpc_smc_stream_stats st;
  int crc = rrpc_smc_stream_close(s, &st, 0);
  print_link(&st);
  close(fd);
  device_resources(o.res_dev, res_after, sizeof res_after);
  printf("resources: before=[%s] after-close=[%s] %s\n", res_before, res_after,
         strcmp(res_before, res_after) == 0 ? "same" : "DIFFER");
  if (rc != 0) return fprintf(stderr, "rrpc_smc_client: ping-pong: %s\n", strerror(-rc)), 1;
  printf("close: %s\n", crc == 0 ? "peer's close CDC received" : strerror(-crc));
  if (!o.expect_death) {
    double per = (t2 - t1) / o.rounds;
    printf("smcr: ok size=%zu rounds=%u connect_ms=%.2f rtt_us=%.1f MBps=%.2f\n", o.size,
           o.rounds, (t1 - t0) * 1e3, per * 1e6, 2.0 * (double)o.size / per / 1e6);
  }
  free(out);
  free(in);
  return crc == 0 || o.expect_death ? 0 : 1;
}
