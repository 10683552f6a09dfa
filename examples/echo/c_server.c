/* c_server.c - the echo server in plain C on the rrpc C API: echoes each
 * message (protobuf bytes by hand, see echo_wire.h) and its attachment.
 * Usage: c_server [ip:port | port]   (default 8000; --help prints usage) */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/echo/echo_wire.h"
#include "rrpc/rrpc.h"

/* Runs on an rrpc loop thread; responds before returning. */
static void echo(void *arg, rrpc_server_call *call) {
  (void)arg;
  const rrpc_iobuf *req = rrpc_server_call_request(call);
  rrpc_controller *cntl = rrpc_server_call_controller(call);
  size_t n = rrpc_iobuf_length(req);
  char *bytes = malloc(n ? n : 1);
  rrpc_iobuf *resp = NULL;
  const char *msg;
  size_t msg_len;
  if (bytes == NULL || rrpc_iobuf_new(&resp) != 0) {
    rrpc_controller_set_failed(cntl, RRPC_EINTERNAL, "out of memory");
    goto respond;
  }
  rrpc_iobuf_copy_out(req, 0, bytes, n);
  if (echo_wire_decode(bytes, n, &msg, &msg_len) != 0) {
    rrpc_controller_set_failed(cntl, RRPC_EREQUEST, "not an example.EchoRequest");
    goto respond;
  }
  if (echo_wire_append(resp, msg, msg_len) != 0 ||
      rrpc_iobuf_append_iobuf(rrpc_controller_response_attachment(cntl),
                              rrpc_controller_request_attachment(cntl)) != 0) {
    rrpc_controller_set_failed(cntl, RRPC_EINTERNAL, "out of memory");
  }
respond:
  rrpc_server_call_respond(call, resp); /* a failed controller sends the error instead */
  rrpc_iobuf_free(resp);
  free(bytes);
}

static void usage(FILE *to) {
  fprintf(to, "usage: c_server [PORT | IP:PORT]   (default 8000)\n"
              "Serves example.EchoService over TCP until Ctrl-C or SIGTERM.\n");
}

int main(int argc, char **argv) {
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
    usage(stderr);
    return 2;
  }
  const char *addr = argc > 1 ? argv[1] : "8000";
  /* Block the quit signals before rrpc starts its threads, so they inherit
   * the mask and main alone receives them in sigwait. */
  sigset_t quit;
  sigemptyset(&quit);
  sigaddset(&quit, SIGINT);
  sigaddset(&quit, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &quit, NULL);

  rrpc_server *server;
  int rc = rrpc_server_new(NULL, &server);
  if (rc == 0) rc = rrpc_server_add_method(server, "example.EchoService", "Echo", echo, NULL);
  if (rc == 0) rc = rrpc_server_start(server, addr);
  if (rc == -EINVAL) {
    fprintf(stderr, "c_server: '%s' is not a port or IP:PORT\n", addr);
    usage(stderr);
    return 2;
  }
  if (rc != 0) {
    fprintf(stderr, "c_server: %s\n", rrpc_strerror(rc));
    return 1;
  }
  printf("c_server: listening on port %d\n", rrpc_server_port(server));
  fflush(stdout);
  int sig;
  sigwait(&quit, &sig);
  rrpc_server_free(server);
  return 0;
}
