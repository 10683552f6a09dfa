/* addr.c - "ip:port" parsing for channels and servers. */
#include "rrpc/internal/addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

static int parse_port(const char *p, uint16_t *out) {
  if (*p == '\0') return -EINVAL;
  char *end;
  long v = strtol(p, &end, 10);
  if (*end != '\0' || v < 0 || v > 65535) return -EINVAL;
  *out = (uint16_t)v;
  return 0;
}

int rrpc__addr_parse(const char *s, struct sockaddr_in *out) {
  if (s == NULL) return -EINVAL;
  memset(out, 0, sizeof *out);
  out->sin_family = AF_INET;
  const char *colon = strrchr(s, ':');
  const char *port = colon ? colon + 1 : s;
  uint16_t p;
  if (parse_port(port, &p) != 0) return -EINVAL;
  out->sin_port = htons(p);
  size_t hlen = colon ? (size_t)(colon - s) : 0;
  if (hlen == 0) {
    out->sin_addr.s_addr = htonl(INADDR_ANY);
    return 0;
  }
  char host[256];
  if (hlen >= sizeof host) return -EINVAL;
  memcpy(host, s, hlen);
  host[hlen] = '\0';
  if (inet_pton(AF_INET, host, &out->sin_addr) == 1) return 0;
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
  struct addrinfo *res = NULL;
  if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL) return -EHOSTUNREACH;
  out->sin_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return 0;
}
