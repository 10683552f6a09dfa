/* server.c - the remote_write example's owner: each example.Remote/Region
 * call registers a buffer (the size the request names, in decimal) on the
 * caller's connection for remote WRITE and answers its token; the writer
 * then pushes bytes into it one-sided (RDMA) or in frames (TCP), with
 * NOTIFY, and this side only counts the notifications. example.Remote/Stats
 * answers "cpu_us notified_bytes notifies copied_bytes checksum": the
 * process's CPU time, what the notifications covered, and a checksum of the
 * buffer so the writer can check the bytes landed.
 * Usage: server --port=N [--ip=A] [--tcp]   (--help prints usage) */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "rrpc/rrpc.h"

/* One region at a time (the example's client asks once per run). */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static rrpc_remote_link *g_link;
static rrpc_remote_region *g_region;
static uint8_t *g_buf;
static size_t g_len;
static uint64_t g_notified_bytes, g_notifies;

static uint64_t cpu_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
         (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* On the connection's loop thread: count, nothing else. */
static void on_notify(void *arg, rrpc_remote_region *r, uint64_t off, uint64_t len, uint32_t tag) {
  (void)arg, (void)r, (void)off, (void)tag;
  pthread_mutex_lock(&g_mu);
  g_notified_bytes += len;
  g_notifies++;
  pthread_mutex_unlock(&g_mu);
}

static void drop_region_locked(void) {
  rrpc_remote_region_free(g_region);
  rrpc_remote_link_release(g_link);
  free(g_buf);
  g_region = NULL;
  g_link = NULL;
  g_buf = NULL;
}

static void respond_text(rrpc_server_call *call, const char *text) {
  rrpc_iobuf *resp = NULL;
  if (rrpc_iobuf_new(&resp) == 0) rrpc_iobuf_append(resp, text, strlen(text));
  rrpc_server_call_respond(call, resp);
  rrpc_iobuf_free(resp);
}

static void region(void *arg, rrpc_server_call *call) {
  (void)arg;
  char req[32] = "";
  rrpc_iobuf_copy_out(rrpc_server_call_request(call), 0, req, sizeof req - 1);
  size_t len = (size_t)strtoull(req, NULL, 10);
  rrpc_controller *cntl = rrpc_server_call_controller(call);
  pthread_mutex_lock(&g_mu);
  drop_region_locked();
  g_notified_bytes = g_notifies = 0;
  int rc = len == 0 ? -EINVAL : 0;
  if (rc == 0) rc = (g_buf = calloc(1, len)) == NULL ? -ENOMEM : 0;
  if (rc == 0) rc = rrpc_server_call_remote_link(call, &g_link);
  if (rc == 0) rrpc_remote_link_set_notify(g_link, on_notify, NULL);
  if (rc == 0) rc = rrpc_remote_region_register(g_link, g_buf, len, RRPC_REMOTE_WRITE, &g_region);
  rrpc_remote_token tok;
  if (rc == 0) rc = rrpc_remote_region_token(g_region, &tok);
  if (rc == 0) g_len = len;
  else drop_region_locked();
  pthread_mutex_unlock(&g_mu);
  if (rc != 0) {
    rrpc_controller_set_failed(cntl, RRPC_EINTERNAL, rrpc_strerror(rc));
    rrpc_server_call_respond(call, NULL);
    return;
  }
  rrpc_iobuf *resp = NULL;
  if (rrpc_iobuf_new(&resp) == 0) rrpc_iobuf_append(resp, tok.bytes, sizeof tok.bytes);
  rrpc_server_call_respond(call, resp);
  rrpc_iobuf_free(resp);
}

static void stats(void *arg, rrpc_server_call *call) {
  (void)arg;
  char text[160];
  uint64_t cpu = cpu_us(); /* before the checksum, which is not the transfer's */
  pthread_mutex_lock(&g_mu);
  uint64_t sum = 1469598103934665603ull; /* FNV-1a over the buffer */
  for (size_t i = 0; i < g_len && g_buf != NULL; i++) sum = (sum ^ g_buf[i]) * 1099511628211ull;
  rrpc_remote_link_stats st = {0};
  if (g_link != NULL) rrpc_remote_link_get_stats(g_link, &st);
  snprintf(text, sizeof text, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64, cpu,
           g_notified_bytes, g_notifies, st.served_bytes, sum);
  pthread_mutex_unlock(&g_mu);
  respond_text(call, text);
}

static void usage(FILE *to) {
  fprintf(to, "usage: server --port=N [--ip=A] [--tcp]\n"
              "Owns the buffers example remote_write clients write into (RDMA unless --tcp),\n"
              "until Ctrl-C or SIGTERM.\n");
}

int main(int argc, char **argv) {
  const char *port = NULL, *ip = "0.0.0.0";
  int tcp = 0;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--port=", 7) == 0) port = argv[i] + 7;
    else if (strncmp(argv[i], "--ip=", 5) == 0) ip = argv[i] + 5;
    else if (strcmp(argv[i], "--tcp") == 0) tcp = 1;
    else {
      usage(strcmp(argv[i], "--help") == 0 ? stdout : stderr);
      return strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  if (port == NULL) {
    usage(stderr);
    return 2;
  }
  sigset_t quit;
  sigemptyset(&quit);
  sigaddset(&quit, SIGINT);
  sigaddset(&quit, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &quit, NULL);

  char addr[80];
  snprintf(addr, sizeof addr, "%s:%s", ip, port);
  rrpc_server_options so = {0};
  so.use_rdma = !tcp;
  rrpc_server *server;
  int rc = rrpc_server_new(&so, &server);
  if (rc == 0) rc = rrpc_server_add_method(server, "example.Remote", "Region", region, NULL);
  if (rc == 0) rc = rrpc_server_add_method(server, "example.Remote", "Stats", stats, NULL);
  if (rc == 0) rc = rrpc_server_start(server, addr);
  if (rc != 0) {
    fprintf(stderr, "server: %s: %s\n", addr, rrpc_strerror(rc));
    return 1;
  }
  printf("remote_write server: listening on port %d (%s)\n", rrpc_server_port(server), tcp ? "tcp" : "rdma");
  fflush(stdout);
  int sig;
  sigwait(&quit, &sig);
  pthread_mutex_lock(&g_mu);
  drop_region_locked();
  pthread_mutex_unlock(&g_mu);
  rrpc_server_free(server);
  return 0;
}
