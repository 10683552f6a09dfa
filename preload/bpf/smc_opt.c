/* smc_opt.c - user-space side of the SMC option sock_ops program
 * (smc_opt.bpf.c): loads it with libbpf from the skeleton the build
 * generates, attaches it to this process's cgroup v2, and marks and reads
 * sockets through its socket-storage map, keyed by fd.
 *
 * Built without libbpf (or clang/bpftool at build time) every call
 * reports -ENOSYS, and the policy runs in peers mode. */
#include "preload/bpf/smc_opt.h"

#include <errno.h>

#ifdef RRPC_HAVE_LIBBPF
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "preload/bpf/smc_opt.skel.h"
#include "preload/bpf/smc_opt_state.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_rc = -ENOSYS;
static int g_map_fd = -1;
/* Loaded for the life of the process; volatile, so the store that keeps it
 * reachable (leak checkers) is not optimised away: nothing reads it. */
static struct rrpc_smcopt_bpf *volatile g_skel;

/* libbpf would print its load errors into the host program's stderr. */
static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap) {
  (void)level;
  (void)fmt;
  (void)ap;
  return 0;
}

/* The cgroup v2 mount point, from /proc/self/mountinfo ("... - cgroup2 ..."). */
static int cgroup2_mount(char *out, size_t cap) {
  FILE *f = fopen("/proc/self/mountinfo", "re");
  if (f == NULL) return -ENOSYS;
  char line[1024];
  int rc = -ENOSYS;
  while (fgets(line, sizeof line, f) != NULL) {
    char root[256], point[512];
    if (strstr(line, " - cgroup2 ") == NULL) continue;
    if (sscanf(line, "%*s %*s %*s %255s %511s", root, point) != 2 || strcmp(root, "/") != 0) continue;
    if ((size_t)snprintf(out, cap, "%s", point) < cap) rc = 0;
    break;
  }
  fclose(f);
  return rc;
}

/* This process's cgroup v2 directory, opened: "0::PATH" of /proc/self/cgroup
 * under the mount point. */
static int own_cgroup_fd(void) {
  char mount[512], line[1024], path[1600];
  int rc = cgroup2_mount(mount, sizeof mount);
  if (rc != 0) return rc;
  FILE *f = fopen("/proc/self/cgroup", "re");
  if (f == NULL) return -ENOSYS;
  rc = -ENOSYS;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "0::", 3) != 0) continue;
    line[strcspn(line, "\n")] = '\0';
    if ((size_t)snprintf(path, sizeof path, "%s%s", mount, line + 3) < sizeof path) rc = 0;
    break;
  }
  fclose(f);
  if (rc != 0) return rc;
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return fd >= 0 ? fd : -errno;
}

static int load_and_attach(void) {
  libbpf_set_print(quiet);
  int cg = own_cgroup_fd();
  if (cg < 0) return cg;
  struct rrpc_smcopt_bpf *skel = rrpc_smcopt_bpf__open_and_load();
  if (skel == NULL) {
    int e = errno != 0 ? -errno : -EPERM;
    close(cg);
    return e;
  }
  /* A bpf_link: detached when the last fd to it closes (this process and
   * the children it forks without exec). */
  struct bpf_link *link = bpf_program__attach_cgroup(skel->progs.rrpc_smcopt, cg);
  int e = link == NULL ? (errno != 0 ? -errno : -EPERM) : 0;
  close(cg);
  if (e != 0) {
    rrpc_smcopt_bpf__destroy(skel);
    return e;
  }
  skel->links.rrpc_smcopt = link;
  g_map_fd = bpf_map__fd(skel->maps.rrpc_smcopt_sk);
  g_skel = skel;
  return 0;
}

static void enable_once(void) { g_rc = load_and_attach(); }

int rrpc_smcopt_enable(void) {
  pthread_once(&g_once, enable_once);
  return g_rc;
}

/* Only a TCP socket that neither connected nor listens yet can be marked:
 * the program decides at connect() and listen(). */
static int check_markable(int fd) {
  int v;
  socklen_t len = sizeof v;
  if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len) != 0) return -errno;
  if (v != IPPROTO_TCP) return -EPROTONOSUPPORT;
  struct tcp_info ti;
  len = sizeof ti;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return -errno;
  return ti.tcpi_state == TCP_CLOSE ? 0 : -EISCONN;
}

int rrpc_smcopt_mark(int fd) {
  int rc = rrpc_smcopt_enable();
  if (rc != 0) return rc;
  if ((rc = check_markable(fd)) != 0) return rc;
  struct rrpc_smcopt_state st = {.marked = 1};
  return bpf_map_update_elem(g_map_fd, &fd, &st, BPF_ANY) == 0 ? 0 : -errno;
}

int rrpc_smcopt_peer_offered(int fd) {
  int rc = rrpc_smcopt_enable();
  if (rc != 0) return rc;
  struct rrpc_smcopt_state st;
  if (bpf_map_lookup_elem(g_map_fd, &fd, &st) != 0) return -errno; /* -ENOENT: never marked */
  if (!st.marked) return -ENOENT;
  if (!st.seen) return -EINPROGRESS; /* no handshake completed on it yet */
  return st.offered ? 1 : 0;
}

#else /* !RRPC_HAVE_LIBBPF */

int rrpc_smcopt_enable(void) { return -ENOSYS; }

int rrpc_smcopt_mark(int fd) {
  (void)fd;
  return -ENOSYS;
}

int rrpc_smcopt_peer_offered(int fd) {
  (void)fd;
  return -ENOSYS;
}

#endif
