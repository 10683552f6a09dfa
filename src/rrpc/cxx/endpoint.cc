// endpoint.cc - parsing and printing rrpc::EndPoint.
#include "rrpc/cxx/endpoint.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ostream>

namespace rrpc {

const ip_t IP_ANY = {htonl(INADDR_ANY)};
const ip_t IP_NONE = {htonl(INADDR_NONE)};

namespace {

// "0".."65535" exactly; -1 otherwise.
int ParsePort(const char* s) {
  if (*s < '0' || *s > '9') return -1;
  errno = 0;
  char* end = nullptr;
  long v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0 || v > 65535) return -1;
  return static_cast<int>(v);
}

// An IPv6 address in its canonical text ("::1" for "0::0001"), or "".
std::string CanonicalIpv6(const char* s) {
  in6_addr a;
  char buf[INET6_ADDRSTRLEN];
  if (inet_pton(AF_INET6, s, &a) != 1 || inet_ntop(AF_INET6, &a, buf, sizeof buf) == nullptr)
    return "";
  return buf;
}

}  // namespace

int str2ip(const char* str, ip_t* ip) {
  if (str == nullptr) return -1;
  return inet_pton(AF_INET, str, ip) == 1 ? 0 : -1;
}

std::string ip2str(ip_t ip) {
  char buf[INET_ADDRSTRLEN];
  return inet_ntop(AF_INET, &ip, buf, sizeof buf) ? buf : "";
}

int str2endpoint(const char* ip, int port, EndPoint* point) {
  if (ip == nullptr || port < 0 || port > 65535) return -1;
  EndPoint p;
  p.port = port;
  if (str2ip(ip, &p.ip) != 0) {
    std::string v6 = CanonicalIpv6(ip);
    if (v6.empty()) return -1;
    p.extended = "[" + v6 + "]";
  }
  *point = p;
  return 0;
}

int str2endpoint(const char* str, EndPoint* point) {
  if (str == nullptr) return -1;
  std::string s(str);
  if (s.compare(0, 5, "unix:") == 0) {
    if (s.size() == 5) return -1;
    EndPoint p;
    p.extended = s;
    *point = p;
    return 0;
  }
  size_t colon = s.rfind(':');
  if (colon == std::string::npos) return -1;
  int port = ParsePort(s.c_str() + colon + 1);
  if (port < 0) return -1;
  std::string host = s.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    if (CanonicalIpv6(host.c_str()).empty()) return -1;
  } else if (host.find(':') != std::string::npos) {
    return -1;  // an IPv6 address needs its brackets before ":port"
  }
  return str2endpoint(host.c_str(), port, point);
}

std::string endpoint2str(const EndPoint& point) {
  if (point.extended.compare(0, 5, "unix:") == 0) return point.extended;
  std::string host = point.extended.empty() ? ip2str(point.ip) : point.extended;
  return host + ":" + std::to_string(point.port);
}

std::ostream& operator<<(std::ostream& os, const EndPoint& point) {
  return os << endpoint2str(point);
}

bool operator==(const EndPoint& a, const EndPoint& b) {
  return a.ip.s_addr == b.ip.s_addr && a.port == b.port && a.extended == b.extended;
}

}  // namespace rrpc
