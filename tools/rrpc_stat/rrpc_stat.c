/* rrpc_stat - what smcss and smcr show for SMC-R, for a running rrpc
 * process: its connections (transport, fallback reason, QPN, window,
 * credits, bytes), its RDMA device and counters, its metrics and method
 * figures, read from the builtin pages on the server's own port.
 *
 *   rrpc_stat HOST:PORT connections|devices|vars|status [-j] [-d]
 *             [--prefix P] [--watch N [--count K]]
 *
 * -j prints the page's JSON; -d adds the detail columns (state, device,
 * GID, ring sizes, send queue use) to connections; --watch N refreshes
 * every N seconds (--count K stops after K rounds). Exit status 0, 1 on
 * a usage error, 2 when the server cannot be reached or refuses. Plain C
 * and sockets only: it runs where the rrpc library is not installed. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define RESPONSE_MAX ((size_t)64 << 20) /* the server caps its pages at this */
#define TIMEOUT_S 5

struct opts {
  char host[256], port[16];
  const char *page; /* the page path */
  int json, detail, watch, count;
  const char *prefix;
};

static void usage(void) {
  fprintf(stderr, "usage: rrpc_stat HOST:PORT connections|devices|vars|status [-j] [-d] [--prefix P]\n"
                  "                 [--watch N [--count K]]\n");
}

static int connect_to(const struct opts *o) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res, *ai;
  int rc = getaddrinfo(o->host, o->port, &hints, &res);
  if (rc != 0) {
    fprintf(stderr, "rrpc_stat: %s: %s\n", o->host, gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  for (ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    struct timeval tv = {TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) fprintf(stderr, "rrpc_stat: cannot connect to %s:%s: %s\n", o->host, o->port, strerror(errno));
  return fd;
}

/* GET the page; the body goes to stdout. 0 or -1 (said on stderr). */
static int fetch(const struct opts *o) {
  int fd = connect_to(o);
  if (fd < 0) return -1;
  char req[1024];
  int n = snprintf(req, sizeof req, "GET %s?format=%s%s%s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: rrpc_stat\r\n"
                                    "Connection: close\r\n\r\n",
                   o->page, o->json ? "json" : "text", o->detail ? "&detail=1" : "",
                   o->prefix ? "&prefix=" : "", o->prefix ? o->prefix : "", o->host);
  if (n <= 0 || (size_t)n >= sizeof req || send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
    fprintf(stderr, "rrpc_stat: cannot send the request\n");
    close(fd);
    return -1;
  }
  size_t len = 0, cap = 65536;
  char *buf = malloc(cap);
  for (;;) {
    if (buf == NULL) break;
    if (len + 1 == cap) {
      if (cap >= RESPONSE_MAX) break;
      char *nb = realloc(buf, cap * 2);
      if (nb == NULL) break;
      buf = nb;
      cap *= 2;
    }
    ssize_t r = recv(fd, buf + len, cap - len - 1, 0);
    if (r <= 0) break; /* the server answers with Connection: close */
    len += (size_t)r;
  }
  close(fd);
  if (buf == NULL) return -1;
  buf[len] = '\0';
  int status = 0;
  char *body = strstr(buf, "\r\n\r\n");
  if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1 || body == NULL) {
    fprintf(stderr, "rrpc_stat: %s:%s did not answer with HTTP (is it an rrpc server with its builtin "
                    "pages on?)\n", o->host, o->port);
    free(buf);
    return -1;
  }
  body += 4;
  if (status != 200) {
    fprintf(stderr, "rrpc_stat: %s: HTTP %d: %s", o->page, status, body);
    free(buf);
    return -1;
  }
  fwrite(body, 1, len - (size_t)(body - buf), stdout);
  fflush(stdout);
  free(buf);
  return 0;
}

static const char *page_of(const char *cmd) {
  if (strcmp(cmd, "connections") == 0) return "/connections";
  if (strcmp(cmd, "devices") == 0) return "/rdma";
  if (strcmp(cmd, "vars") == 0) return "/vars";
  if (strcmp(cmd, "status") == 0) return "/status";
  if (strcmp(cmd, "flags") == 0) return "/flags";
  return NULL;
}

static int parse_target(const char *t, struct opts *o) {
  const char *colon = strrchr(t, ':');
  if (colon == NULL || colon == t || colon[1] == '\0') return -1;
  size_t hl = (size_t)(colon - t);
  if (t[0] == '[' && colon[-1] == ']') t++, hl -= 2; /* [v6]:port */
  if (hl >= sizeof o->host || strlen(colon + 1) >= sizeof o->port) return -1;
  memcpy(o->host, t, hl);
  o->host[hl] = '\0';
  strcpy(o->port, colon + 1);
  return 0;
}

static int parse_args(int argc, char **argv, struct opts *o) {
  memset(o, 0, sizeof *o);
  int pos = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-j") == 0) o->json = 1;
    else if (strcmp(a, "-d") == 0) o->detail = 1;
    else if (strcmp(a, "--watch") == 0 && i + 1 < argc) o->watch = atoi(argv[++i]);
    else if (strcmp(a, "--count") == 0 && i + 1 < argc) o->count = atoi(argv[++i]);
    else if (strcmp(a, "--prefix") == 0 && i + 1 < argc) o->prefix = argv[++i];
    else if (a[0] == '-') return -1;
    else if (pos == 0 && parse_target(a, o) == 0) pos++;
    else if (pos == 1 && (o->page = page_of(a)) != NULL) pos++;
    else return -1;
  }
  if (pos != 2 || o->watch < 0 || o->count < 0) return -1;
  return 0;
}

int main(int argc, char **argv) {
  struct opts o;
  if (parse_args(argc, argv, &o) != 0) {
    usage();
    return 1;
  }
  if (o.watch == 0) return fetch(&o) == 0 ? 0 : 2;
  int tty = isatty(STDOUT_FILENO);
  for (int round = 1;; round++) {
    if (tty) fputs("\033[H\033[2J", stdout); /* like watch(1): redraw in place */
    else if (round > 1) fputs("\n", stdout);
    if (fetch(&o) != 0) return 2;
    if (o.count > 0 && round >= o.count) return 0;
    /* The refresh interval the user asked for, not a synchronisation. */
    struct timespec ts = {o.watch, 0};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
}
