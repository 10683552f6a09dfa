/* addr.c - address text for channels and servers: IPv4 "ip:port" (or a
 * host name), IPv6 "[ip]:port" and "unix:/path", parsed as hostile input
 * (bounded length, digits-only ports, no partial matches). */
#include "rrpc/internal/addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

static int parse_port(const char *p, uint16_t *out) {
  size_t n = strlen(p);
  if (n == 0 || n > 5) return -EINVAL;
  unsigned v = 0;
  for (size_t i = 0; i < n; i++) {
    if (p[i] < '0' || p[i] > '9') return -EINVAL;
    v = v * 10 + (unsigned)(p[i] - '0');
  }
  if (v > 65535) return -EINVAL;
  *out = (uint16_t)v;
  return 0;
}

static int parse_unix(const char *path, rrpc__addr *out) {
  struct sockaddr_un *un = (struct sockaddr_un *)&out->ss;
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof un->sun_path) return -EINVAL;
  un->sun_family = AF_UNIX;
  memcpy(un->sun_path, path, n + 1);
  out->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
  return 0;
}

/* "[v6]:port": the brackets hold a literal, never a name. */
static int parse_v6(const char *s, rrpc__addr *out) {
  const char *close = strchr(s, ']');
  if (close == NULL || close[1] != ':') return -EINVAL;
  size_t hlen = (size_t)(close - (s + 1));
  char host[INET6_ADDRSTRLEN];
  if (hlen == 0 || hlen >= sizeof host) return -EINVAL;
  memcpy(host, s + 1, hlen);
  host[hlen] = '\0';
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->ss;
  uint16_t port;
  if (parse_port(close + 2, &port) != 0 || inet_pton(AF_INET6, host, &in6->sin6_addr) != 1) return -EINVAL;
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(port);
  out->len = sizeof *in6;
  return 0;
}

static int resolve_v4(const char *host, struct in_addr *out) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
  struct addrinfo *res = NULL;
  if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL) return -EHOSTUNREACH;
  *out = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return 0;
}

static int parse_v4(const char *s, int resolve, rrpc__addr *out) {
  const char *colon = strrchr(s, ':');
  size_t hlen = colon ? (size_t)(colon - s) : 0;
  uint16_t port;
  if (parse_port(colon ? colon + 1 : s, &port) != 0) return -EINVAL;
  struct sockaddr_in *in = (struct sockaddr_in *)&out->ss;
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  out->len = sizeof *in;
  if (hlen == 0) {
    in->sin_addr.s_addr = htonl(INADDR_ANY);
    return 0;
  }
  char host[256];
  if (hlen >= sizeof host) return -EINVAL;
  memcpy(host, s, hlen);
  host[hlen] = '\0';
  /* A bare IPv6 address ("::1:80") is ambiguous: it needs brackets. */
  if (memchr(host, ':', hlen) != NULL) return -EINVAL;
  if (inet_pton(AF_INET, host, &in->sin_addr) == 1) return 0;
  if (!resolve) return -EHOSTUNREACH;
  return resolve_v4(host, &in->sin_addr);
}

int rrpc__addr_parse_ex(const char *s, int resolve, rrpc__addr *out) {
  if (s == NULL || out == NULL) return -EINVAL;
  memset(out, 0, sizeof *out);
  if (strnlen(s, RRPC_ADDR_TEXT_MAX + 1) > RRPC_ADDR_TEXT_MAX) return -EINVAL;
  if (strncmp(s, "unix:", 5) == 0) return parse_unix(s + 5, out);
  if (s[0] == '[') return parse_v6(s, out);
  return parse_v4(s, resolve, out);
}

int rrpc__addr_parse_any(const char *s, rrpc__addr *out) { return rrpc__addr_parse_ex(s, 1, out); }

int rrpc__addr_parse(const char *s, struct sockaddr_in *out) {
  rrpc__addr a;
  int rc = rrpc__addr_parse_ex(s, 1, &a);
  if (rc != 0) return rc;
  if (a.ss.ss_family != AF_INET) return -EAFNOSUPPORT;
  memcpy(out, &a.ss, sizeof *out);
  return 0;
}

int rrpc__addr_is_any(const rrpc__addr *a) {
  if (a->ss.ss_family == AF_INET)
    return ((const struct sockaddr_in *)&a->ss)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (a->ss.ss_family == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)&a->ss)->sin6_addr);
  return 0;
}

void rrpc__sockaddr_str(const struct sockaddr *sa, socklen_t salen, char *buf, size_t len) {
  if (len == 0) return;
  char ip[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
    snprintf(buf, len, "%s:%d", ip, ntohs(in->sin_port));
  } else if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
    snprintf(buf, len, "[%s]:%d", ip, ntohs(in6->sin6_port));
  } else if (sa->sa_family == AF_UNIX) {
    /* An unnamed peer (the accepting side) has no path. */
    const struct sockaddr_un *un = (const struct sockaddr_un *)sa;
    size_t off = offsetof(struct sockaddr_un, sun_path);
    size_t n = salen > off ? strnlen(un->sun_path, (size_t)salen - off) : 0;
    snprintf(buf, len, "unix:%.*s", (int)n, un->sun_path);
  } else {
    snprintf(buf, len, "?:0");
  }
}
