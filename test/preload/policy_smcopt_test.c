/* policy_smcopt_test.c - the SMC option sock_ops program end to end
 * (preload/bpf/smc_opt.{h,c}, smc_opt.bpf.c): for each of the four
 * combinations of a marked or unmarked client and listener on `ADDR`
 * (default 127.0.0.1), it checks on the wire (an AF_PACKET capture of the
 * handshake on the loopback or the given address's device) that the SYN
 * carries kind 254 / e2 d4 c3 d9 exactly when the client is marked and the
 * SYN-ACK exactly when both are, and that rrpc_smcopt_peer_offered() says
 * so on both ends.
 *
 * Needs root (CAP_BPF, CAP_NET_ADMIN, CAP_NET_RAW) and cgroup v2: run it in
 * the Soft-RoCE VM (test/preload/policy_smcopt_vm.sh). With --unprivileged
 * it checks the other promise instead: enable, mark and peer_offered all
 * return negative codes, nothing crashes. With --syncookies first (the
 * kernel set to answer every SYN with a cookie) no combination may offer.
 * Exit 0 when every check holds. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "preload/bpf/smc_opt.h"

static int g_failures;
/* --syncookies: the kernel answers every SYN with a cookie
 * (net.ipv4.tcp_syncookies=2); the SYN is not saved then, so no end may
 * claim the option was offered, and the SYN-ACK must not carry it. */
static int g_cookies;

#define CHECK(cond, ...)                    \
  do {                                      \
    if (!(cond)) {                          \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);         \
      fprintf(stderr, "\n");                \
      g_failures++;                         \
    }                                       \
  } while (0)

/* 1 if the TCP options in [opt, opt+n) hold kind 254 len 6 e2 d4 c3 d9. */
static int has_smc_option(const unsigned char *opt, size_t n) {
  static const unsigned char want[6] = {254, 6, 0xe2, 0xd4, 0xc3, 0xd9};
  size_t i = 0;
  while (i < n) {
    if (opt[i] == 0) break;
    if (opt[i] == 1) {
      i++;
      continue;
    }
    if (i + 1 >= n || opt[i + 1] < 2 || i + opt[i + 1] > n) break;
    if (opt[i + 1] == 6 && memcmp(opt + i, want, 6) == 0) return 1;
    i += opt[i + 1];
  }
  return 0;
}

typedef struct seen {
  int syn, syn_opt, synack, synack_opt;
} seen;

/* Reads what the capture holds for server port `port`: the packet socket
 * got its copy of each packet when it was sent, before connect() returned. */
static void drain_capture(int cap, unsigned port, seen *s) {
  unsigned char buf[2048];
  ssize_t n;
  while ((n = recv(cap, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
    const unsigned char *p = buf + 14; /* loopback and dummy have Ethernet headers */
    size_t len = (size_t)n - 14;
    if ((size_t)n < 14 + 20) continue;
    /* Copied out: after the 14-byte link header they are not aligned. */
    struct iphdr ip;
    struct tcphdr th;
    memcpy(&ip, p, sizeof ip);
    if (ip.version != 4 || ip.protocol != IPPROTO_TCP) continue;
    size_t ihl = (size_t)ip.ihl * 4;
    if (len < ihl + 20) continue;
    memcpy(&th, p + ihl, sizeof th);
    size_t doff = (size_t)th.doff * 4;
    if (doff < 20 || len < ihl + doff || !th.syn) continue;
    const unsigned char *opt = p + ihl + 20;
    if (!th.ack && ntohs(th.dest) == port) {
      s->syn++;
      s->syn_opt += has_smc_option(opt, doff - 20);
    } else if (th.ack && ntohs(th.source) == port) {
      s->synack++;
      s->synack_opt += has_smc_option(opt, doff - 20);
    }
  }
}

static int open_capture(const char *ifname) {
  int cap = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_IP));
  if (cap < 0) return -errno;
  struct sockaddr_ll ll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP),
                           .sll_ifindex = (int)if_nametoindex(ifname)};
  if (ll.sll_ifindex == 0 || bind(cap, (struct sockaddr *)&ll, sizeof ll) != 0) {
    close(cap);
    return -ENODEV;
  }
  return cap;
}

static void one_case(const char *addr, const char *ifname, int mark_client, int mark_server) {
  const char *name = mark_client ? (mark_server ? "marked->marked" : "marked->plain")
                                 : (mark_server ? "plain->marked" : "plain->plain");
  struct sockaddr_in sa = {.sin_family = AF_INET};
  inet_pton(AF_INET, addr, &sa.sin_addr);
  socklen_t salen = sizeof sa;
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (mark_server) CHECK(rrpc_smcopt_mark(lfd) == 0, "%s: mark listener", name);
  CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(lfd, 4) == 0, "%s: listen", name);
  getsockname(lfd, (struct sockaddr *)&sa, &salen);
  if (mark_server) CHECK(rrpc_smcopt_mark(lfd) == -EISCONN, "%s: a listening socket is too late to mark", name);
  int cap = open_capture(ifname);
  CHECK(cap >= 0, "%s: AF_PACKET capture on %s: %d", name, ifname, cap);
  int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (mark_client) CHECK(rrpc_smcopt_mark(cfd) == 0, "%s: mark client", name);
  CHECK(connect(cfd, (struct sockaddr *)&sa, sizeof sa) == 0, "%s: connect: %s", name, strerror(errno));
  int afd = accept(lfd, NULL, NULL);
  CHECK(afd >= 0, "%s: accept", name);
  int want = mark_client && mark_server && !g_cookies;
  int c = rrpc_smcopt_peer_offered(cfd), s = rrpc_smcopt_peer_offered(afd);
  CHECK(c == (mark_client ? want : -ENOENT), "%s: client peer_offered %d", name, c);
  CHECK(s == (mark_server ? want : -ENOENT), "%s: server peer_offered %d", name, s);
  seen w = {0, 0, 0, 0};
  if (cap >= 0) {
    drain_capture(cap, ntohs(sa.sin_port), &w);
    close(cap);
  }
  CHECK(w.syn >= 1 && w.synack >= 1, "%s: handshake not captured (syn %d synack %d)", name, w.syn, w.synack);
  CHECK((w.syn_opt > 0) == mark_client, "%s: SYN option %d/%d", name, w.syn_opt, w.syn);
  CHECK((w.synack_opt > 0) == want, "%s: SYN-ACK option %d/%d", name, w.synack_opt, w.synack);
  printf("%-15s SYN opt %d/%d  SYN-ACK opt %d/%d  offered client %d server %d\n", name, w.syn_opt, w.syn,
         w.synack_opt, w.synack, c, s);
  /* Bytes still flow after the handshake (the option stops there). */
  char b = 'x';
  CHECK(write(cfd, &b, 1) == 1 && read(afd, &b, 1) == 1 && b == 'x', "%s: data", name);
  close(cfd);
  close(afd);
  close(lfd);
}

static int unprivileged(void) {
  int e = rrpc_smcopt_enable();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int m = rrpc_smcopt_mark(fd), o = rrpc_smcopt_peer_offered(fd);
  printf("unprivileged: enable %d mark %d peer_offered %d\n", e, m, o);
  CHECK(e < 0 && m < 0 && o < 0, "every call must fail without the privilege");
  CHECK(rrpc_smcopt_enable() == e, "enable gives the same answer again");
  close(fd);
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--unprivileged") == 0) return unprivileged();
  if (argc > 1 && strcmp(argv[1], "--syncookies") == 0) {
    g_cookies = 1;
    argc--;
    argv++;
  }
  const char *addr = argc > 1 ? argv[1] : "127.0.0.1";
  const char *ifname = argc > 2 ? argv[2] : "lo";
  int rc = rrpc_smcopt_enable();
  if (rc != 0) {
    fprintf(stderr, "FAIL rrpc_smcopt_enable: %d (%s)\n", rc, strerror(-rc));
    return 1;
  }
  for (int c = 1; c >= 0; c--)
    for (int s = 1; s >= 0; s--) one_case(addr, ifname, c, s);
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  CHECK(rrpc_smcopt_mark(fd) == -EPROTONOSUPPORT, "a UDP socket cannot be marked");
  close(fd);
  CHECK(rrpc_smcopt_mark(-1) < 0 && rrpc_smcopt_peer_offered(12345) < 0, "bad fds fail");
  printf("%s\n", g_failures == 0 ? "PASS" : "FAILED");
  return g_failures == 0 ? 0 : 1;
}
