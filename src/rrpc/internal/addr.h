/* internal/addr.h - private to the rrpc core: parsing "ip:port" strings. */
#ifndef RRPC_INTERNAL_ADDR_H
#define RRPC_INTERNAL_ADDR_H

#include <netinet/in.h>

/* rrpc__addr_parse - "ip:port", "host:port", ":port" or "port" into an IPv4
 * address (empty host = any, for servers; a host name is resolved here,
 * blocking). 0 or -EINVAL (bad syntax/port), -EHOSTUNREACH (no address). */
int rrpc__addr_parse(const char *s, struct sockaddr_in *out);

#endif /* RRPC_INTERNAL_ADDR_H */
