/* policy_min.c - peers mode of the selection policy (see policy_min.h):
 * RRPC_RUN_PEERS is a comma-separated list of "ADDR", "ADDR:PORT",
 * "ADDR/BITS", ":PORT", "[V6]:PORT" and "[V6]"; a connection may try RDMA
 * when its peer (client side) or its peer or local port (server side)
 * matches one entry. */
#include "preload/policy_min.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

enum { PEERS_MAX = 64 };

typedef struct peer_rule {
  int family; /* 0: any address (port only) */
  unsigned char addr[16];
  int bits;
  int port; /* 0: any */
} peer_rule;

struct rrpc_run_policy {
  peer_rule rules[PEERS_MAX];
  int n;
  int debug;
};

static int parse_port(const char *s, int *port) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v <= 0 || v > 65535) return -1;
  *port = (int)v;
  return 0;
}

static int parse_rule(char *tok, peer_rule *r) {
  memset(r, 0, sizeof *r);
  char *addr = tok, *port = NULL, *slash;
  if (*tok == ':') {
    return parse_port(tok + 1, &r->port);
  }
  if (*tok == '[') {
    char *close = strchr(tok, ']');
    if (close == NULL) return -1;
    *close = '\0';
    addr = tok + 1;
    if (close[1] == ':') port = close + 2;
    else if (close[1] != '\0') return -1;
  } else if (strchr(tok, ':') != NULL && strchr(tok, '.') != NULL) {
    port = strrchr(tok, ':');
    *port++ = '\0';
  }
  if (port != NULL && parse_port(port, &r->port) != 0) return -1;
  slash = strchr(addr, '/');
  if (slash != NULL) *slash++ = '\0';
  if (inet_pton(AF_INET, addr, r->addr) == 1) {
    r->family = AF_INET;
    r->bits = 32;
  } else if (inet_pton(AF_INET6, addr, r->addr) == 1) {
    r->family = AF_INET6;
    r->bits = 128;
  } else {
    return -1;
  }
  if (slash != NULL) {
    char *end;
    long b = strtol(slash, &end, 10);
    if (*slash == '\0' || *end != '\0' || b < 0 || b > r->bits) return -1;
    r->bits = (int)b;
  }
  return 0;
}

int rrpc_run_policy_parse(const char *(*env)(const char *name), rrpc_run_policy **out, const char **err) {
  rrpc_run_policy *p = calloc(1, sizeof *p);
  if (p == NULL) return -ENOMEM;
  const char *dbg = env("RRPC_RUN_DEBUG");
  p->debug = dbg != NULL && strcmp(dbg, "1") == 0;
  const char *peers = env("RRPC_RUN_PEERS");
  if (peers != NULL) {
    char *copy = strdup(peers);
    if (copy == NULL) {
      free(p);
      return -ENOMEM;
    }
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
      if (p->n == PEERS_MAX || parse_rule(t, &p->rules[p->n]) != 0) {
        free(copy);
        free(p);
        *err = "RRPC_RUN_PEERS: malformed entry or more than 64 entries";
        return -EINVAL;
      }
      p->n++;
    }
    free(copy);
  }
  *out = p;
  return 0;
}

void rrpc_run_policy_free(rrpc_run_policy *p) { free(p); }

static int addr_of(const struct sockaddr *sa, int *family, const unsigned char **a, int *port) {
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    *family = AF_INET;
    *a = (const unsigned char *)&in->sin_addr;
    *port = ntohs(in->sin_port);
    return 0;
  }
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    *family = AF_INET6;
    *a = (const unsigned char *)&in6->sin6_addr;
    *port = ntohs(in6->sin6_port);
    return 0;
  }
  return -1;
}

static int prefix_eq(const unsigned char *a, const unsigned char *b, int bits) {
  int bytes = bits / 8, rest = bits % 8;
  if (memcmp(a, b, (size_t)bytes) != 0) return 0;
  if (rest == 0) return 1;
  unsigned char mask = (unsigned char)(0xff << (8 - rest));
  return (a[bytes] & mask) == (b[bytes] & mask);
}

/* `port_alt`: a second port that may match (the server's own port). */
static int matches(const rrpc_run_policy *p, const struct sockaddr *sa, int port_alt) {
  int family, port;
  const unsigned char *a;
  if (sa == NULL || addr_of(sa, &family, &a, &port) != 0) return 0;
  for (int i = 0; i < p->n; i++) {
    const peer_rule *r = &p->rules[i];
    if (r->port != 0 && r->port != port && r->port != port_alt) continue;
    if (r->family == 0) return 1;
    if (r->family == family && prefix_eq(r->addr, a, r->bits)) return 1;
  }
  return 0;
}

int rrpc_run_policy_client_may(const rrpc_run_policy *p, const struct sockaddr *peer, socklen_t len,
                               const char *comm) {
  (void)len;
  (void)comm;
  return matches(p, peer, -1);
}

int rrpc_run_policy_server_may(const rrpc_run_policy *p, const struct sockaddr *local,
                               const struct sockaddr *peer, socklen_t len, const char *comm) {
  (void)len;
  (void)comm;
  int family, lport = -1;
  const unsigned char *a;
  if (local != NULL) addr_of(local, &family, &a, &lport);
  return matches(p, peer, lport);
}

int rrpc_run_policy_debug(const rrpc_run_policy *p) { return p->debug; }
const char *rrpc_run_policy_mode(const rrpc_run_policy *p) {
  (void)p;
  return "peers";
}
