// test_util.cc - see test_util.h.
#include "test/common/test_util.h"

#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

extern char **environ;

namespace rrpc_test {

std::string iobuf_string(const rrpc_iobuf *b) {
  std::string s(rrpc_iobuf_length(b), '\0');
  rrpc_iobuf_copy_out(b, 0, s.data(), s.size());
  return s;
}

std::string pattern(size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i++) s[i] = (char)((i * 131 + seed * 7 + (i >> 11)) & 0xff);
  return s;
}

Child spawn_self(const std::vector<std::string> &extra_env) {
  Child c;
  int out[2];
  if (pipe(out) != 0) return c;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  // extra_env wins over an inherited variable of the same name (getenv
  // returns the first one: the inherited copy must go).
  auto named_in_extra = [&](const char *e) {
    for (const auto &x : extra_env) {
      size_t eq = x.find('=');
      if (eq != std::string::npos && strncmp(e, x.c_str(), eq + 1) == 0) return true;
    }
    return false;
  };
  std::vector<std::string> envs;
  for (char **e = environ; *e; e++)
    if (!named_in_extra(*e)) envs.emplace_back(*e);
  envs.insert(envs.end(), extra_env.begin(), extra_env.end());
  std::vector<char *> envp;
  for (auto &e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  self[n > 0 ? n : 0] = '\0';
  char *argv[] = {self, nullptr};
  if (posix_spawn(&c.pid, self, &fa, nullptr, argv, envp.data()) != 0) c.pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  char buf[512];
  ssize_t r = c.pid > 0 ? read(out[0], buf, sizeof buf) : 0;
  if (r > 0) c.first_output.assign(buf, (size_t)r);
  close(out[0]);
  return c;
}

int wait_child(const Child &c) {
  int status = 0;
  if (c.pid <= 0 || waitpid(c.pid, &status, 0) != c.pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string smc_data_dir() {
  const char *e = std::getenv("RRPC_TEST_DATA_DIR");
  return std::string(e != nullptr && *e != '\0' ? e : "test/data") + "/smc-r/";
}

std::vector<uint8_t> load_smc_hex(const std::string &rel) {
  std::ifstream f(smc_data_dir() + rel);
  EXPECT_TRUE(f.good()) << "cannot open " << smc_data_dir() + rel
                        << " (run from the repository root or set RRPC_TEST_DATA_DIR)";
  std::vector<uint8_t> out;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string tok;
    while (in >> tok) out.push_back(static_cast<uint8_t>(std::stoul(tok, nullptr, 16)));
  }
  return out;
}

std::string rdma_test_addr() {
  if (const char *a = getenv("RRPC_TEST_RDMA_ADDR")) return a;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  inet_pton(AF_INET, "10.99.0.1", &sa.sin_addr);
  bool ours = fd >= 0 && bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) == 0;
  if (fd >= 0) close(fd);
  return ours ? "10.99.0.1" : "127.0.0.1";
}

std::string command_output(const std::string &cmd, int *rc) {
  std::string out;
  FILE *p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    if (rc) *rc = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  if (rc) *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

}  // namespace rrpc_test
