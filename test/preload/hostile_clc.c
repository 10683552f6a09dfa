/* hostile_clc.c - a hostile rrpc-run peer: a client whose SYN carries SMC-R's
 * option 254 (when the eBPF program loads; otherwise it says so and goes on
 * without it), then speaks bad CLC to a server and checks that the server
 * closes the connection within the handshake deadline, never later.
 *
 * Usage: hostile_clc ADDR PORT MODE DEADLINE_MS
 *   MODE garbage      a CLC header with the eyecatcher, a Proposal type and
 *                     an impossible length, then 200 random bytes
 *   MODE stall-eye    the first 3 bytes of the eyecatcher, then silence
 *   MODE stall-body   a Proposal header announcing 52 bytes, 20 sent, silence
 * Exit 0 when the server closed (EOF or reset) within DEADLINE_MS + 1 s of
 * slack (the VM is slow) - whatever it sent first (a Decline) is printed. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "preload/bpf/smc_opt.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The bytes MODE sends; *n set. */
static const unsigned char *payload(const char *mode, size_t *n) {
  static unsigned char buf[256];
  static const unsigned char eye[4] = {0xe2, 0xd4, 0xc3, 0xd9};
  memcpy(buf, eye, 4);
  if (strcmp(mode, "stall-eye") == 0) {
    *n = 3;
  } else if (strcmp(mode, "stall-body") == 0) {
    buf[4] = 0x01; /* Proposal */
    buf[5] = 0x00;
    buf[6] = 52; /* length, big-endian */
    buf[7] = 0x10;
    memset(buf + 8, 0x5a, 12);
    *n = 20;
  } else if (strcmp(mode, "garbage") == 0) {
    buf[4] = 0x01;
    buf[5] = 0xff; /* longer than any CLC message */
    buf[6] = 0xff;
    buf[7] = 0xff;
    unsigned seed = 12345;
    for (size_t i = 8; i < 208; i++) buf[i] = (unsigned char)(rand_r(&seed) >> 3);
    *n = 208;
  } else {
    return NULL;
  }
  return buf;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: hostile_clc ADDR PORT garbage|stall-eye|stall-body DEADLINE_MS\n");
    return 2;
  }
  size_t n;
  const unsigned char *bytes = payload(argv[3], &n);
  int deadline = atoi(argv[4]);
  if (bytes == NULL || deadline <= 0) return 2;
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2]))};
  if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) return 2;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int mark = rrpc_smcopt_mark(fd);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    perror("hostile_clc: connect");
    return 1;
  }
  int offered = rrpc_smcopt_peer_offered(fd);
  if (send(fd, bytes, n, MSG_NOSIGNAL) != (ssize_t)n) {
    perror("hostile_clc: send");
    return 1;
  }
  double t0 = now_ms(), limit = deadline + 1000.0;
  size_t got = 0;
  unsigned char first[16];
  const char *how = "still open";
  for (;;) {
    double left = limit - (now_ms() - t0);
    if (left <= 0) break;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, (int)left + 1) <= 0) continue;
    unsigned char b[4096];
    ssize_t r = recv(fd, b, sizeof b, 0);
    if (r > 0) {
      for (ssize_t i = 0; i < r && got < sizeof first; i++) first[got++] = b[i];
      continue;
    }
    how = r == 0 ? "EOF" : (errno == ECONNRESET ? "reset" : "error");
    break;
  }
  double ms = now_ms() - t0;
  printf("hostile_clc %s: option 254 %s (mark %d, server offered %d), %zu bytes back%s", argv[3],
         mark == 0 ? "sent" : "not sent", mark, offered, got, got ? " [" : "");
  for (size_t i = 0; i < got && i < 8; i++) printf("%02x%s", first[i], i + 1 < got && i < 7 ? " " : "]");
  printf(", %s after %.0f ms (deadline %d ms)\n", how, ms, deadline);
  close(fd);
  return strcmp(how, "still open") != 0 && ms <= limit ? 0 : 1;
}
