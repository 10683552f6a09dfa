// rrpc/cxx/endpoint.h - rrpc::EndPoint, the role of brpc's butil::EndPoint:
// an address a Server listens on (Server::Start(EndPoint, ...)), parsed from
// text with str2endpoint and printed with << or endpoint2str.
//
// IPv4 lives in `ip` and `port`, as in brpc. IPv6 ("[::1]:8000") and unix
// sockets ("unix:/path") are kept as text in `extended` (brpc keeps them in
// an extended form as well); `ip` is then IP_ANY.
//
// [thread-compatible] value type.
#ifndef RRPC_CXX_ENDPOINT_H
#define RRPC_CXX_ENDPOINT_H

#include <netinet/in.h>

#include <iosfwd>
#include <string>

namespace rrpc {

using ip_t = in_addr;
extern const ip_t IP_ANY;   // 0.0.0.0
extern const ip_t IP_NONE;  // 255.255.255.255

struct EndPoint {
  EndPoint() : ip(IP_ANY), port(0) {}
  EndPoint(ip_t ip_in, int port_in) : ip(ip_in), port(port_in) {}

  ip_t ip;
  int port;
  // "[ipv6]" (port in `port`) or "unix:/path" (port 0); "" for IPv4.
  std::string extended;
};

// "a.b.c.d" into *ip: 0, or -1 if it is not a dotted IPv4 address.
int str2ip(const char* str, ip_t* ip);
// "a.b.c.d".
std::string ip2str(ip_t ip);
// "ip:port", "[ipv6]:port" or "unix:/path" (no name resolution, as brpc's)
// into *point: 0, or -1 if malformed or the port is not 0..65535.
int str2endpoint(const char* str, EndPoint* point);
// An IPv4 or IPv6 address (without brackets) and a port: 0 or -1.
int str2endpoint(const char* ip, int port, EndPoint* point);
// "ip:port", "[ipv6]:port" or "unix:/path": what Server::Start(const char*)
// and Channel::Init take.
std::string endpoint2str(const EndPoint& point);
std::ostream& operator<<(std::ostream& os, const EndPoint& point);
bool operator==(const EndPoint& a, const EndPoint& b);
inline bool operator!=(const EndPoint& a, const EndPoint& b) { return !(a == b); }

}  // namespace rrpc

#endif  // RRPC_CXX_ENDPOINT_H
