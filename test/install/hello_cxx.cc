// hello_cxx.cc - an out-of-tree C++ program built against an installed rrpc
// (tools/check-install). Run as `hello_cxx --max_body_size=4096`: gflags
// refuses an unknown flag, so this passes only if rrpc's flag definitions
// were linked in, and the server's options must carry the value.
#include <gflags/gflags.h>

#include <cstdio>

#include "rrpc/cxx/rrpc.h"
#include "rrpc/version.h"

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  rrpc::ServerOptions opts;
  if (opts.max_body_size != 4096) {
    fprintf(stderr, "hello_cxx: max_body_size is %zu, want 4096 (run with --max_body_size=4096)\n",
            opts.max_body_size);
    return 1;
  }
  rrpc::Server server;
  if (server.Start("127.0.0.1:0", &opts) != 0) return 1;
  printf("hello_cxx: rrpc %s, server on port %d, max_body_size %zu\n", rrpc_version_string(),
         server.listen_port(), opts.max_body_size);
  server.Stop();
  return 0;
}
