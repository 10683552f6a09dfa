/* internal/addr.h - private to the rrpc core: the addresses channels and
 * servers take, as text and as socket addresses. */
#ifndef RRPC_INTERNAL_ADDR_H
#define RRPC_INTERNAL_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An address to connect to or listen on: AF_INET, AF_INET6 or AF_UNIX. */
typedef struct rrpc__addr {
  struct sockaddr_storage ss;
  socklen_t len; /* of the part of ss that is used */
} rrpc__addr;

/* Longest address text accepted (a host name is at most 253 bytes). */
#define RRPC_ADDR_TEXT_MAX 300

/* rrpc__addr_parse - one of
 *   "ip:port", "host:port", ":port", "port"  IPv4 (empty host = any, for
 *                                            servers; a host name is
 *                                            resolved here, blocking, to IPv4)
 *   "[ipv6]:port", "[::]:port"                IPv6 literal (:: = any)
 *   "unix:/path" (or a relative path)         a unix stream socket
 * into *out. The port is 0 - 65535 in decimal digits only. With resolve = 0
 * a host name is not looked up and fails with -EHOSTUNREACH (for fuzzing).
 * 0, -EINVAL (bad syntax, port, or a path too long for sun_path),
 * -EHOSTUNREACH (no address). Any thread. */
int rrpc__addr_parse_ex(const char *s, int resolve, rrpc__addr *out);
int rrpc__addr_parse_any(const char *s, rrpc__addr *out); /* resolve = 1 */

/* rrpc__addr_parse - the IPv4 forms only, into a sockaddr_in (for callers
 * that keep IPv4 addresses); an IPv6 or unix address is -EAFNOSUPPORT. */
struct sockaddr_in;
int rrpc__addr_parse(const char *s, struct sockaddr_in *out);

/* rrpc__addr_is_any - 1 for 0.0.0.0 and :: (a server's wildcard, never a
 * place to connect to). */
int rrpc__addr_is_any(const rrpc__addr *a);

/* rrpc__sockaddr_str - "1.2.3.4:80", "[::1]:80" or "unix:/path" into buf
 * (NUL terminated, truncated to len). `sa` of `salen` bytes, any family. */
void rrpc__sockaddr_str(const struct sockaddr *sa, socklen_t salen, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_INTERNAL_ADDR_H */
