/* client.c - the remote_write example's writer: asks the server for a
 * region of --size bytes on this connection, then pushes --size bytes into
 * it in --piece writes with NOTIFY, --depth in flight, --rounds times, and
 * prints what it measured. Over RDMA the bytes move one-sided from a
 * registered buffer into the server's (no copy on either side: the last
 * line shows the owner's copied-byte count and rrpc's copy counters);
 * with --tcp, in frames the owner copies.
 * Usage: client --server=IP:PORT [--size=BYTES] [--piece=BYTES] [--depth=N]
 *               [--rounds=N] [--tcp]
 * The last line is a summary: throughput=<x>MiB/s and the CPU of both sides. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "rrpc/rrpc.h"

struct run {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t done, failed;
  int first_error;
};

static void on_done(void *arg, int status) {
  struct run *r = arg;
  pthread_mutex_lock(&r->mu);
  r->done++;
  if (status != 0 && r->failed++ == 0) r->first_error = status;
  pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

static uint64_t now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static uint64_t cpu_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
         (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* Per-thread CPU (user + system, in clock ticks) from /proc/self/task, so
 * the summary can say which of the writer's threads spent it: the
 * submitting thread (this one), the connection's loop (completions), the
 * one-sided poster, the verbs helpers. */
enum { MAX_THREADS = 64 };
struct thread_cpu {
  int tid;
  char name[24];
  unsigned long long ticks;
};

static int threads_cpu(struct thread_cpu *t, int cap) {
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < cap) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", atoi(e->d_name));
    FILE *f = fopen(path, "r");
    if (f == NULL) continue;
    size_t got = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[got] = 0;
    /* "tid (comm) state ..." - comm may hold spaces: fields count from the last ')'. */
    char *open = strchr(line, '('), *close = strrchr(line, ')');
    if (open == NULL || close == NULL || close < open) continue;
    unsigned long long ut = 0, st = 0;
    /* After ')': state is field 3; utime 14, stime 15. */
    if (sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) continue;
    t[n].tid = atoi(e->d_name);
    size_t len = (size_t)(close - open - 1) < sizeof t[n].name - 1 ? (size_t)(close - open - 1) : sizeof t[n].name - 1;
    memcpy(t[n].name, open + 1, len);
    t[n].name[len] = 0;
    t[n].ticks = ut + st;
    n++;
  }
  closedir(d);
  return n;
}

/* What each thread spent between two samples, per GiB moved, busiest
 * first (threads that spent nothing are left out). */
static void print_threads_cpu(const struct thread_cpu *a, int na, const struct thread_cpu *b, int nb, int self,
                              double gib) {
  double hz = (double)sysconf(_SC_CLK_TCK);
  struct thread_cpu d[MAX_THREADS];
  int nd = 0;
  for (int i = 0; i < nb; i++) {
    unsigned long long before = 0;
    for (int j = 0; j < na; j++)
      if (a[j].tid == b[i].tid) before = a[j].ticks;
    if (b[i].ticks <= before) continue;
    d[nd] = b[i];
    d[nd++].ticks = b[i].ticks - before;
  }
  for (int i = 1; i < nd; i++)
    for (int j = i; j > 0 && d[j].ticks > d[j - 1].ticks; j--) {
      struct thread_cpu x = d[j];
      d[j] = d[j - 1];
      d[j - 1] = x;
    }
  printf("remote_write: writer cpu by thread (s/GiB):");
  for (int i = 0; i < nd; i++)
    printf(" %s%s=%.3f", d[i].tid == self ? "main:" : "", d[i].name, (double)d[i].ticks / hz / gib);
  printf("\n");
}

/* A sync call whose answer is text or bytes: its length, or a negative code. */
static long call(rrpc_channel *ch, const char *method, const char *req, void *out, size_t cap) {
  rrpc_controller *cntl;
  rrpc_iobuf *rq, *rs;
  if (rrpc_controller_new(&cntl) != 0) return -ENOMEM;
  rrpc_controller_set_timeout_ms(cntl, 60000);
  rrpc_iobuf_new(&rq);
  rrpc_iobuf_new(&rs);
  rrpc_iobuf_append(rq, req, strlen(req));
  long rc = rrpc_channel_call(ch, "example.Remote", method, cntl, rq, rs, NULL, NULL);
  if (rc == 0) rc = (long)rrpc_iobuf_copy_out(rs, 0, out, cap);
  rrpc_iobuf_free(rq);
  rrpc_iobuf_free(rs);
  rrpc_controller_free(cntl);
  return rc;
}

struct server_stats {
  uint64_t cpu_us, notified_bytes, notifies, copied, sum;
};

static int server_stats(rrpc_channel *ch, struct server_stats *s) {
  char text[160] = "";
  long n = call(ch, "Stats", "", text, sizeof text - 1);
  if (n < 0) return (int)n;
  text[n] = 0;
  return sscanf(text, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &s->cpu_us, &s->notified_bytes,
                &s->notifies, &s->copied, &s->sum) == 5 ? 0 : -EPROTO;
}

static uint64_t fnv(const uint8_t *p, size_t n) {
  uint64_t sum = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) sum = (sum ^ p[i]) * 1099511628211ull;
  return sum;
}

static void usage(FILE *to) {
  fprintf(to, "usage: client --server=IP:PORT [--size=BYTES] [--piece=BYTES] [--depth=N] [--rounds=N] [--tcp]\n"
              "  defaults: --size=67108864 (64 MiB) --piece=1048576 --depth=8 --rounds=4\n");
}

int main(int argc, char **argv) {
  const char *server = NULL;
  uint64_t size = 64u << 20, piece = 1u << 20;
  int depth = 8, rounds = 4, tcp = 0;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--server=", 9) == 0) server = argv[i] + 9;
    else if (strncmp(argv[i], "--size=", 7) == 0) size = strtoull(argv[i] + 7, NULL, 10);
    else if (strncmp(argv[i], "--piece=", 8) == 0) piece = strtoull(argv[i] + 8, NULL, 10);
    else if (strncmp(argv[i], "--depth=", 8) == 0) depth = atoi(argv[i] + 8);
    else if (strncmp(argv[i], "--rounds=", 9) == 0) rounds = atoi(argv[i] + 9);
    else if (strcmp(argv[i], "--tcp") == 0) tcp = 1;
    else {
      usage(strcmp(argv[i], "--help") == 0 ? stdout : stderr);
      return strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  if (server == NULL || size == 0 || piece == 0 || depth < 1 || rounds < 1) {
    usage(stderr);
    return 2;
  }
  rrpc_channel_options co = {0};
  co.use_rdma = !tcp;
  co.timeout_ms = 60000;
  rrpc_channel *ch;
  int rc = rrpc_channel_new(server, &co, &ch);
  if (rc != 0) {
    fprintf(stderr, "client: %s: %s\n", server, rrpc_strerror(rc));
    return 1;
  }
  char req[32];
  snprintf(req, sizeof req, "%" PRIu64, size);
  rrpc_remote_token tok;
  long n = call(ch, "Region", req, tok.bytes, sizeof tok.bytes);
  if (n != (long)sizeof tok.bytes) {
    fprintf(stderr, "client: Region: %s\n", n < 0 ? rrpc_strerror((int)n) : "not a token");
    return 1;
  }
  rrpc_remote_link *link;
  uint8_t *buf = malloc(size);
  rrpc_remote_region *local = NULL;
  rc = buf == NULL ? -ENOMEM : rrpc_channel_remote_link(ch, &link);
  if (rc == 0) rc = rrpc_remote_region_register(link, buf, size, 0, &local);
  if (rc != 0) {
    fprintf(stderr, "client: local region: %s\n", rrpc_strerror(rc));
    return 1;
  }
  for (uint64_t i = 0; i < size; i++) buf[i] = (uint8_t)(i * 131 + 7);
  rrpc_rdma_stats rs0, rs1;
  rrpc_rdma_get_stats(&rs0);
  struct server_stats s0, s1;
  if ((rc = server_stats(ch, &s0)) != 0) {
    fprintf(stderr, "client: Stats: %s\n", rrpc_strerror(rc));
    return 1;
  }
  struct run r = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  uint64_t per_round = (size + piece - 1) / piece, total = per_round * (uint64_t)rounds, issued = 0;
  struct thread_cpu th0[MAX_THREADS], th1[MAX_THREADS];
  int nth0 = threads_cpu(th0, MAX_THREADS);
  uint64_t t0 = now_us(), c0 = cpu_us();
  while (issued < total) {
    pthread_mutex_lock(&r.mu);
    while (issued - r.done >= (uint64_t)depth) pthread_cond_wait(&r.cv, &r.mu);
    int stop = r.failed != 0;
    pthread_mutex_unlock(&r.mu);
    if (stop) break;
    uint64_t off = (issued % per_round) * piece;
    rrpc_remote_xfer x = {.local = local, .local_offset = off, .token = &tok, .remote_offset = off,
                          .length = size - off < piece ? size - off : piece, .flags = RRPC_REMOTE_NOTIFY,
                          .tag = (uint32_t)issued, .done = on_done, .arg = &r};
    if ((rc = rrpc_remote_write(link, &x)) != 0) {
      fprintf(stderr, "client: write: %s\n", rrpc_strerror(rc));
      break;
    }
    issued++;
  }
  pthread_mutex_lock(&r.mu);
  while (r.done < issued) pthread_cond_wait(&r.cv, &r.mu);
  pthread_mutex_unlock(&r.mu);
  uint64_t t1 = now_us(), c1 = cpu_us();
  int nth1 = threads_cpu(th1, MAX_THREADS);
  rrpc_rdma_get_stats(&rs1);
  rrpc_remote_link_stats ls;
  rrpc_remote_link_get_stats(link, &ls);
  /* The last NOTIFY may still be on its way: Stats goes after it in the stream. */
  if ((rc = server_stats(ch, &s1)) != 0) {
    fprintf(stderr, "client: Stats: %s\n", rrpc_strerror(rc));
    return 1;
  }
  if (r.failed || issued < total) {
    fprintf(stderr, "client: %" PRIu64 " of %" PRIu64 " writes failed (first: %s)\n", r.failed, issued,
            rrpc_strerror(r.first_error));
    return 1;
  }
  double bytes = (double)size * rounds, secs = (double)(t1 - t0) / 1e6, gib = bytes / (1u << 30);
  int ok = s1.sum == fnv(buf, size) && s1.notified_bytes - s0.notified_bytes == (uint64_t)bytes;
  printf("remote_write: %s %s%d x %" PRIu64 " bytes in %" PRIu64 "-byte writes, depth %d: %.3f s, %s\n",
         ls.rdma ? "rdma one-sided" : "frames in the byte stream", "", rounds, size, piece, depth, secs,
         ok ? "the server's buffer matches and every byte was notified" : "MISMATCH");
  print_threads_cpu(th0, nth0, th1, nth1, (int)getpid(), gib);
  printf("remote_write: throughput=%.1fMiB/s (%.3f GiB/s) client_cpu=%.3fs (%.3f s/GiB) "
         "server_cpu=%.3fs (%.3f s/GiB) notifies=%" PRIu64 " owner_copied=%" PRIu64
         " copied_send=%" PRIu64 " copied_recv=%" PRIu64 "\n",
         bytes / (1u << 20) / secs, gib / secs, (double)(c1 - c0) / 1e6, (double)(c1 - c0) / 1e6 / gib,
         (double)(s1.cpu_us - s0.cpu_us) / 1e6, (double)(s1.cpu_us - s0.cpu_us) / 1e6 / gib,
         s1.notifies - s0.notifies, s1.copied - s0.copied, rs1.bytes_copied_send - rs0.bytes_copied_send,
         rs1.bytes_copied_recv - rs0.bytes_copied_recv);
  rrpc_remote_region_free(local);
  rrpc_remote_link_release(link);
  rrpc_channel_free(ch);
  free(buf);
  return ok ? 0 : 1;
}
