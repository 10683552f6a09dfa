// hostile.cc - see hostile.h.
#include "test/common/hostile.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "rrpc/internal/baidu_std.h"
#include "test/common/test_util.h"

namespace rrpc_test {

int raw_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

std::string request_frame(const std::string &service, const std::string &method,
                          const std::string &payload, int64_t correlation_id) {
  rrpc__rpc_meta meta;
  memset(&meta, 0, sizeof meta);
  meta.has = RRPC_META_HAS_REQUEST | RRPC_META_HAS_CORRELATION_ID;
  meta.service_name = {service.data(), service.size()};
  meta.method_name = {method.data(), method.size()};
  meta.correlation_id = correlation_id;
  rrpc_iobuf *pl, *out;
  rrpc_iobuf_new(&pl);
  rrpc_iobuf_new(&out);
  rrpc_iobuf_append(pl, payload.data(), payload.size());
  std::string frame;
  if (rrpc__baidu_pack(out, &meta, pl, nullptr) == 0) frame = iobuf_string(out);
  rrpc_iobuf_free(pl);
  rrpc_iobuf_free(out);
  return frame;
}

std::string frame_header(uint32_t body_size, uint32_t meta_size) {
  unsigned char h[12] = {'P', 'R', 'P', 'C'};
  for (int i = 0; i < 4; i++) {
    h[4 + i] = static_cast<unsigned char>(body_size >> (24 - 8 * i));
    h[8 + i] = static_cast<unsigned char>(meta_size >> (24 - 8 * i));
  }
  return std::string(reinterpret_cast<char *>(h), sizeof h);
}

static std::string proc_path(pid_t pid, const char *what) {
  return pid == 0 ? std::string("/proc/self/") + what
                  : "/proc/" + std::to_string(pid) + "/" + what;
}

size_t rss_bytes(pid_t pid) {
  std::ifstream f(proc_path(pid, "statm"));
  size_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

size_t peak_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<size_t>(ru.ru_maxrss) * 1024;
}

double cpu_seconds(pid_t pid) {
  std::ifstream f(proc_path(pid, "stat"));
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) start past ')'.
  size_t close = all.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(all.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; i++) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

int open_fds() {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (readdir(d) != nullptr) n++;
  closedir(d);
  return n - 3;  // ".", ".." and the directory's own fd
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool wait_until(const std::function<bool()> &cond, int timeout_ms) {
  double end = now_ms() + timeout_ms;
  for (;;) {
    if (cond()) return true;
    if (now_ms() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polling a condition, bounded
  }
}

bool peer_closed(int fd, int timeout_ms) {
  double end = now_ms() + timeout_ms;
  char buf[4096];
  for (;;) {
    int left = static_cast<int>(end - now_ms());
    if (left < 0) return false;
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, left);
    if (r == 0) return false;
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

long raise_fd_limit(long n) {
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  if (static_cast<long>(r.rlim_cur) < n) {
    r.rlim_cur = std::min<rlim_t>(static_cast<rlim_t>(n), r.rlim_max);
    setrlimit(RLIMIT_NOFILE, &r);
    getrlimit(RLIMIT_NOFILE, &r);
  }
  return static_cast<long>(r.rlim_cur);
}

void report(const std::string &name, const std::string &text) {
  printf("ADVERSARIAL %s: %s\n", name.c_str(), text.c_str());
  fflush(stdout);
}

}  // namespace rrpc_test
