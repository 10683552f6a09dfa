/* policy.c - rrpc-run's selection policy: parses RRPC_RUN_PEERS,
 * RRPC_RUN_ONLY, RRPC_RUN_DEBUG and RRPC_RUN_MODE (grammar in policy.h) and
 * answers, per connection, whether it may try RDMA. Everything is parsed
 * once into flat arrays, so a query is a few compares and allocates
 * nothing: it runs inside connect() and accept() of the host program. */
#include "preload/policy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preload/bpf/smc_opt.h"

enum { COMM_KEEP = 15 }; /* the kernel keeps 15 characters of a process name */

typedef struct run_net {
  int family;             /* 0: any address; else AF_INET or AF_INET6 */
  unsigned char addr[16]; /* an IPv4 address is in the first 4 bytes */
  int bits;
} run_net;

typedef struct run_ports {
  unsigned lo, hi; /* 0-65535: any port */
} run_ports;

typedef struct run_peer {
  run_net net;
  run_ports ports;
} run_peer;

typedef struct run_comm {
  char name[COMM_KEEP + 1];
  int prefix; /* the text ended in '*' */
} run_comm;

struct rrpc_run_policy {
  run_peer *peers;
  size_t npeers;
  int peers_set; /* RRPC_RUN_PEERS was given (even empty) */
  run_net *addrs;
  size_t naddrs;
  run_ports *ports;
  size_t nports;
  run_comm *comms;
  size_t ncomms;
  int debug;
  int ebpf;
  char note[200];
};

/* ---- text slices ---------------------------------------------------------- */

typedef struct slice {
  const char *s;
  size_t n;
} slice;

static slice trim(slice x) {
  while (x.n > 0 && (x.s[0] == ' ' || x.s[0] == '\t')) x.s++, x.n--;
  while (x.n > 0 && (x.s[x.n - 1] == ' ' || x.s[x.n - 1] == '\t')) x.n--;
  return x;
}

/* Splits the next item off *rest at `sep`; 0 when *rest is used up. */
static int next_item(slice *rest, char sep, slice *item) {
  if (rest->s == NULL) return 0;
  const char *end = memchr(rest->s, sep, rest->n);
  size_t len = end != NULL ? (size_t)(end - rest->s) : rest->n;
  *item = trim((slice){rest->s, len});
  if (end == NULL) {
    rest->s = NULL;
  } else {
    rest->n -= len + 1;
    rest->s = end + 1;
  }
  return 1;
}

static size_t count_char(const char *s, char c) {
  size_t k = 0;
  for (; *s != '\0'; s++) k += *s == c;
  return k;
}

static int parse_uint(slice x, unsigned max, unsigned *v) {
  if (x.n == 0 || x.n > 5) return -1;
  unsigned acc = 0;
  for (size_t i = 0; i < x.n; i++) {
    if (x.s[i] < '0' || x.s[i] > '9') return -1;
    acc = acc * 10 + (unsigned)(x.s[i] - '0');
  }
  if (acc > max) return -1;
  *v = acc;
  return 0;
}

/* "PORT" or "LO-HI", ports 1-65535. */
static int parse_ports(slice x, run_ports *pr) {
  const char *dash = memchr(x.s, '-', x.n);
  slice lo = {x.s, dash ? (size_t)(dash - x.s) : x.n};
  if (parse_uint(trim(lo), 65535, &pr->lo) != 0 || pr->lo == 0) return -1;
  pr->hi = pr->lo;
  if (dash == NULL) return 0;
  slice hi = {dash + 1, x.n - lo.n - 1};
  if (parse_uint(trim(hi), 65535, &pr->hi) != 0 || pr->hi < pr->lo) return -1;
  return 0;
}

static const unsigned char V4MAPPED[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* "ADDR" or "ADDR/BITS", IPv4 or IPv6 (no brackets). An IPv4-mapped IPv6
 * network of /96 or longer is kept as the IPv4 network it is. */
static int parse_net(slice x, run_net *net) {
  char buf[INET6_ADDRSTRLEN + 8];
  if (x.n == 0 || x.n >= sizeof buf) return -1;
  memcpy(buf, x.s, x.n);
  buf[x.n] = '\0';
  char *slash = strchr(buf, '/');
  if (slash != NULL) *slash = '\0';
  memset(net, 0, sizeof *net);
  if (inet_pton(AF_INET, buf, net->addr) == 1) {
    net->family = AF_INET;
    net->bits = 32;
  } else if (inet_pton(AF_INET6, buf, net->addr) == 1) {
    net->family = AF_INET6;
    net->bits = 128;
  } else {
    return -1;
  }
  if (slash != NULL) {
    unsigned b;
    slice bs = {slash + 1, strlen(slash + 1)};
    if (parse_uint(bs, (unsigned)net->bits, &b) != 0) return -1;
    net->bits = (int)b;
  }
  if (net->family == AF_INET6 && net->bits >= 96 && memcmp(net->addr, V4MAPPED, 12) == 0) {
    memmove(net->addr, net->addr + 12, 4);
    memset(net->addr + 4, 0, 12);
    net->family = AF_INET;
    net->bits -= 96;
  }
  return 0;
}

/* One RRPC_RUN_PEERS entry: ":PORTS", "[V6[/B]]", "[V6[/B]]:PORTS",
 * "V4[/B]", "V4[/B]:PORTS", or a bare "V6[/B]" (no port: its colons are the
 * address's own). */
static int parse_peer(slice x, run_peer *pe) {
  memset(pe, 0, sizeof *pe);
  pe->ports.hi = 65535;
  if (x.n == 0) return -1;
  if (x.s[0] == ':' && (x.n < 2 || x.s[1] != ':')) return parse_ports((slice){x.s + 1, x.n - 1}, &pe->ports);
  slice addr = x, port = {NULL, 0};
  if (x.s[0] == '[') {
    const char *close = memchr(x.s, ']', x.n);
    if (close == NULL) return -1;
    addr = (slice){x.s + 1, (size_t)(close - x.s) - 1};
    size_t after = x.n - (size_t)(close - x.s) - 1;
    if (after > 0) {
      if (close[1] != ':') return -1;
      port = (slice){close + 2, after - 1};
    }
    if (memchr(addr.s, ':', addr.n) == NULL) return -1; /* brackets hold IPv6 only */
  } else {
    const char *colon = memchr(x.s, ':', x.n);
    if (colon != NULL && memchr(colon + 1, ':', x.n - (size_t)(colon - x.s) - 1) == NULL) {
      addr = (slice){x.s, (size_t)(colon - x.s)};
      port = (slice){colon + 1, x.n - addr.n - 1};
    }
  }
  if (parse_net(addr, &pe->net) != 0) return -1;
  if (port.s != NULL && parse_ports(port, &pe->ports) != 0) return -1;
  return 0;
}

/* "NAME" or "PREFIX*"; a name longer than the kernel keeps is compared on
 * what the kernel keeps. */
static int parse_comm(slice x, run_comm *c) {
  memset(c, 0, sizeof *c);
  if (x.n == 0) return -1;
  if (x.s[x.n - 1] == '*') {
    c->prefix = 1;
    x.n--;
  }
  if (memchr(x.s, '*', x.n) != NULL || memchr(x.s, '\0', x.n) != NULL) return -1;
  if (x.n == 0 && !c->prefix) return -1;
  size_t keep = x.n < COMM_KEEP ? x.n : COMM_KEEP;
  if (x.n > COMM_KEEP) c->prefix = 0; /* the whole kept name must match */
  memcpy(c->name, x.s, keep);
  c->name[keep] = '\0';
  return 0;
}

/* ---- the variables -------------------------------------------------------- */

static int parse_peers(rrpc_run_policy *p, const char *v) {
  p->peers_set = 1;
  slice rest = trim((slice){v, strlen(v)}), item;
  if (rest.n == 0) return 0;
  p->peers = calloc(count_char(v, ',') + 1, sizeof *p->peers);
  if (p->peers == NULL) return -ENOMEM;
  while (next_item(&rest, ',', &item))
    if (parse_peer(item, &p->peers[p->npeers++]) != 0) return -EINVAL;
  return 0;
}

static int parse_only_key(rrpc_run_policy *p, slice key, slice list) {
  slice item;
  int is_addr = key.n == 4 && memcmp(key.s, "addr", 4) == 0;
  int is_port = key.n == 4 && memcmp(key.s, "port", 4) == 0;
  int is_comm = key.n == 4 && memcmp(key.s, "comm", 4) == 0;
  if (!is_addr && !is_port && !is_comm) return -EINVAL;
  if (list.n == 0) return -EINVAL;
  while (next_item(&list, ',', &item)) {
    int rc = is_addr   ? parse_net(item, &p->addrs[p->naddrs++])
             : is_port ? parse_ports(item, &p->ports[p->nports++])
                       : parse_comm(item, &p->comms[p->ncomms++]);
    if (rc != 0) return -EINVAL;
  }
  return 0;
}

static int parse_only(rrpc_run_policy *p, const char *v) {
  size_t cap = count_char(v, ',') + count_char(v, ';') + 1; /* every item ends at one of them */
  p->addrs = calloc(cap, sizeof *p->addrs);
  p->ports = calloc(cap, sizeof *p->ports);
  p->comms = calloc(cap, sizeof *p->comms);
  if (p->addrs == NULL || p->ports == NULL || p->comms == NULL) return -ENOMEM;
  slice rest = {v, strlen(v)}, clause;
  int any = 0;
  while (next_item(&rest, ';', &clause)) {
    if (clause.n == 0) continue; /* "a=1;;" or a trailing ';' */
    const char *eq = memchr(clause.s, '=', clause.n);
    if (eq == NULL) return -EINVAL;
    slice key = trim((slice){clause.s, (size_t)(eq - clause.s)});
    slice list = trim((slice){eq + 1, clause.n - (size_t)(eq - clause.s) - 1});
    if (parse_only_key(p, key, list) != 0) return -EINVAL;
    any = 1;
  }
  return any ? 0 : -EINVAL;
}

static int parse_debug(const char *v, int *debug) {
  if (v == NULL || strcmp(v, "") == 0 || strcmp(v, "0") == 0) {
    *debug = 0;
    return 0;
  }
  if (strcmp(v, "1") == 0) {
    *debug = 1;
    return 0;
  }
  return -EINVAL;
}

static const char *errno_name(int e) {
  switch (e) {
    case EPERM: return "EPERM, needs CAP_BPF and CAP_NET_ADMIN";
    case EACCES: return "EACCES";
    case ENOSYS: return "ENOSYS, no eBPF support in this build or kernel";
    case ENOENT: return "ENOENT";
    case EINVAL: return "EINVAL";
    case ENOMEM: return "ENOMEM";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    default: return "error";
  }
}

/* Decides the negotiation: eBPF when it loads (auto, ebpf), else peers. */
static int choose_mode(rrpc_run_policy *p, const char *mode, int (*enable)(void), const char **err) {
  int want_auto = mode == NULL || strcmp(mode, "") == 0 || strcmp(mode, "auto") == 0;
  int want_ebpf = mode != NULL && strcmp(mode, "ebpf") == 0;
  int want_peers = mode != NULL && strcmp(mode, "peers") == 0;
  if (!want_auto && !want_ebpf && !want_peers) {
    *err = "RRPC_RUN_MODE: expected auto, ebpf or peers";
    return -EINVAL;
  }
  const char *nopeers = p->peers_set ? "" : "; RRPC_RUN_PEERS unset: every connection stays plain TCP";
  if (want_peers) {
    snprintf(p->note, sizeof p->note, "negotiation: peers (RRPC_RUN_MODE=peers)%s", nopeers);
    return 0;
  }
  int rc = enable != NULL ? enable() : -ENOSYS;
  if (rc == 0) {
    p->ebpf = 1;
    snprintf(p->note, sizeof p->note, "negotiation: ebpf (TCP option 254 in SYN and SYN-ACK)");
    return 0;
  }
  if (want_ebpf) {
    *err = "RRPC_RUN_MODE=ebpf: the eBPF sock_ops program could not be loaded";
    return rc < 0 ? rc : -EINVAL;
  }
  snprintf(p->note, sizeof p->note, "negotiation: peers (eBPF not loaded: %d %s)%s", rc,
           errno_name(-rc), nopeers);
  return 0;
}

int rrpc__run_policy_parse_ex(const char *(*env)(const char *name), int (*enable)(void),
                              rrpc_run_policy **out, const char **err) {
  static const char *oom = "rrpc-run: out of memory reading the settings";
  rrpc_run_policy *p = calloc(1, sizeof *p);
  const char *why = oom;
  int rc = -ENOMEM;
  if (p == NULL) goto fail;
  const char *peers = env("RRPC_RUN_PEERS"), *only = env("RRPC_RUN_ONLY");
  if (peers != NULL && (rc = parse_peers(p, peers)) != 0) {
    why = rc == -ENOMEM ? oom : "RRPC_RUN_PEERS: malformed (want ADDR, ADDR/BITS, ADDR:PORT, [V6]:PORT, :PORT, PORT-PORT)";
    goto fail;
  }
  if (only != NULL && (rc = parse_only(p, only)) != 0) {
    why = rc == -ENOMEM ? oom : "RRPC_RUN_ONLY: malformed (want addr=...;port=...;comm=...)";
    goto fail;
  }
  if ((rc = parse_debug(env("RRPC_RUN_DEBUG"), &p->debug)) != 0) {
    why = "RRPC_RUN_DEBUG: expected 0 or 1";
    goto fail;
  }
  if ((rc = choose_mode(p, env("RRPC_RUN_MODE"), enable, &why)) != 0) goto fail;
  *out = p;
  return 0;
fail:
  rrpc_run_policy_free(p);
  *err = why;
  return rc;
}

static int real_enable(void) { return rrpc_smcopt_enable(); }

int rrpc_run_policy_parse(const char *(*env)(const char *name), rrpc_run_policy **out,
                          const char **err) {
  return rrpc__run_policy_parse_ex(env, real_enable, out, err);
}

void rrpc_run_policy_free(rrpc_run_policy *p) {
  if (p == NULL) return;
  free(p->peers);
  free(p->addrs);
  free(p->ports);
  free(p->comms);
  free(p);
}

/* ---- queries -------------------------------------------------------------- */

typedef struct endpoint {
  int family; /* 0: not an IP address */
  unsigned char addr[16];
  unsigned port;
} endpoint;

static endpoint endpoint_of(const struct sockaddr *sa, socklen_t len) {
  endpoint e;
  memset(&e, 0, sizeof e);
  if (sa == NULL) return e;
  if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    e.family = AF_INET;
    memcpy(e.addr, &in->sin_addr, 4);
    e.port = ntohs(in->sin_port);
  } else if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    e.family = AF_INET6;
    memcpy(e.addr, &in6->sin6_addr, 16);
    e.port = ntohs(in6->sin6_port);
    if (memcmp(e.addr, V4MAPPED, 12) == 0) {
      e.family = AF_INET;
      memmove(e.addr, e.addr + 12, 4);
      memset(e.addr + 4, 0, 12);
    }
  }
  return e;
}

static int prefix_eq(const unsigned char *a, const unsigned char *b, int bits) {
  size_t bytes = (size_t)bits / 8;
  int rest = bits % 8;
  if (memcmp(a, b, bytes) != 0) return 0;
  if (rest == 0) return 1;
  unsigned char mask = (unsigned char)(0xff << (8 - rest));
  return (a[bytes] & mask) == (b[bytes] & mask);
}

static int net_match(const run_net *n, int family, const unsigned char *addr) {
  if (n->family == 0) return 1;
  if (n->family == family) return prefix_eq(n->addr, addr, n->bits);
  if (n->family == AF_INET6 && family == AF_INET) { /* an IPv6 network may hold ::ffff:0:0/96 */
    unsigned char mapped[16];
    memcpy(mapped, V4MAPPED, 12);
    memcpy(mapped + 12, addr, 4);
    return prefix_eq(n->addr, mapped, n->bits);
  }
  return 0;
}

static int ports_match(const run_ports *r, unsigned port) { return port >= r->lo && port <= r->hi; }

static int comm_match(const run_comm *c, const char *comm) {
  if (c->prefix) return strncmp(comm, c->name, strlen(c->name)) == 0;
  return strncmp(comm, c->name, COMM_KEEP) == 0;
}

static int selected(const rrpc_run_policy *p, const endpoint *peer, unsigned port, const char *comm) {
  size_t i;
  if (p->naddrs > 0) {
    for (i = 0; i < p->naddrs && !net_match(&p->addrs[i], peer->family, peer->addr); i++) {}
    if (i == p->naddrs) return 0;
  }
  if (p->nports > 0) {
    for (i = 0; i < p->nports && !ports_match(&p->ports[i], port); i++) {}
    if (i == p->nports) return 0;
  }
  if (p->ncomms > 0) {
    if (comm == NULL) return 0;
    for (i = 0; i < p->ncomms && !comm_match(&p->comms[i], comm); i++) {}
    if (i == p->ncomms) return 0;
  }
  return 1;
}

static int listed(const rrpc_run_policy *p, const endpoint *peer, unsigned port) {
  for (size_t i = 0; i < p->npeers; i++)
    if (ports_match(&p->peers[i].ports, port) && net_match(&p->peers[i].net, peer->family, peer->addr))
      return 1;
  return 0;
}

/* `port` is the service port: the one connected to, or the local one. */
static int may(const rrpc_run_policy *p, const endpoint *peer, unsigned port, const char *comm) {
  if (p == NULL || peer->family == 0 || !selected(p, peer, port, comm)) return 0;
  if (p->ebpf && !p->peers_set) return 1; /* the SYN options decide */
  return listed(p, peer, port);
}

int rrpc_run_policy_client_may(const rrpc_run_policy *p, const struct sockaddr *peer,
                               socklen_t len, const char *comm) {
  endpoint e = endpoint_of(peer, len);
  return may(p, &e, e.port, comm);
}

int rrpc_run_policy_server_may(const rrpc_run_policy *p, const struct sockaddr *local,
                               const struct sockaddr *peer, socklen_t len, const char *comm) {
  endpoint l = endpoint_of(local, len), e = endpoint_of(peer, len);
  if (l.family == 0) return 0;
  return may(p, &e, l.port, comm);
}

int rrpc_run_policy_debug(const rrpc_run_policy *p) { return p != NULL && p->debug; }

const char *rrpc_run_policy_mode(const rrpc_run_policy *p) {
  return p != NULL && p->ebpf ? "ebpf" : "peers";
}

const char *rrpc_run_policy_note(const rrpc_run_policy *p) {
  return p != NULL ? p->note : "negotiation: none (no policy)";
}
