/* naming_dns.c - dns://host:port: every IPv4 address the name resolves to,
 * resolved again on every periodic fetch (getaddrinfo blocks, so this only
 * ever runs on a channel's naming thread). */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "rrpc/internal/naming.h"

static int split(const char *param, char *host, size_t hostlen, const char **port) {
  const char *colon = strrchr(param, ':');
  if (colon == NULL || colon == param || (size_t)(colon - param) >= hostlen || colon[1] == '\0')
    return -EINVAL;
  memcpy(host, param, (size_t)(colon - param));
  host[colon - param] = '\0';
  *port = colon + 1;
  for (const char *p = *port; *p; p++)
    if (*p < '0' || *p > '9') return -EINVAL;
  return 0;
}

static int seen(const rrpc_naming_entry *out, size_t n, const char *addr) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(out[i].addr, addr) == 0) return 1;
  return 0;
}

static int dns_fetch(void *arg, const char *param, rrpc_naming_entry *out, size_t max, size_t *n) {
  (void)arg;
  char host[RRPC_NAMING_ADDR_MAX];
  const char *port;
  if (split(param, host, sizeof host, &port) != 0) return -EINVAL;
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, port, &hints, &res);
  if (rc != 0) return rc == EAI_NONAME ? -ENOENT : -EHOSTUNREACH;
  size_t count = 0;
  int result = 0;
  for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
    const struct sockaddr_in *sa = (const struct sockaddr_in *)ai->ai_addr;
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof ip);
    rrpc_naming_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.addr, sizeof e.addr, "%s:%u", ip, (unsigned)ntohs(sa->sin_port));
    e.weight = 1;
    if (seen(out, count, e.addr)) continue;
    if (count == max) {
      result = -E2BIG;
      break;
    }
    out[count++] = e;
  }
  freeaddrinfo(res);
  if (result == 0) *n = count;
  return result;
}

const rrpc_naming_service rrpc__naming_dns = {.scheme = "dns", .fetch = dns_fetch, .periodic = 1};
