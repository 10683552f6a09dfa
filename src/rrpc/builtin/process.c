/* process.c - process figures for the builtin pages, read from /proc/self
 * (Linux only, as rrpc is). Bounded reads; nothing allocated. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rrpc/builtin/vars.h"

static double boot_uptime(void) {
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Fields 14-15 (utime, stime), 20 (threads), 22 (starttime), 23 (vsize),
 * 24 (rss pages) of /proc/self/stat, counted after the ")" that ends the
 * command name (which may itself hold spaces). */
static void read_stat(rrpc__process_facts *out) {
  char buf[1024];
  FILE *f = fopen("/proc/self/stat", "re");
  if (f == NULL) return;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  if (p == NULL) return;
  unsigned long utime = 0, stime = 0;
  long threads = 0, rss = 0;
  unsigned long long start = 0, vsize = 0;
  int got = sscanf(p + 2,
                   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %ld %*d %llu "
                   "%llu %ld",
                   &utime, &stime, &threads, &start, &vsize, &rss);
  if (got != 6) return;
  long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
  if (hz <= 0) hz = 100;
  out->cpu_seconds = (double)(utime + stime) / (double)hz;
  out->threads = threads;
  out->vsize_bytes = vsize;
  out->rss_bytes = (unsigned long long)rss * (unsigned long long)(page > 0 ? page : 4096);
  out->uptime_seconds = boot_uptime() - (double)start / (double)hz;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  out->start_unix = (double)now.tv_sec + (double)now.tv_nsec / 1e9 - out->uptime_seconds;
}

void rrpc__process_cmdline(char *buf, size_t len) {
  if (len == 0) return;
  buf[0] = '\0';
  FILE *f = fopen("/proc/self/cmdline", "re");
  if (f == NULL) return;
  size_t n = fread(buf, 1, len - 1, f);
  fclose(f);
  while (n > 0 && buf[n - 1] == '\0') n--; /* the last argument's terminator */
  for (size_t i = 0; i < n; i++)
    if (buf[i] == '\0') buf[i] = ' ';
  buf[n] = '\0';
}

static long count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL) return 0;
  long n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n > 0 ? n - 1 : 0; /* not the directory's own fd */
}

void rrpc__process_facts_get(rrpc__process_facts *out) {
  memset(out, 0, sizeof *out);
  read_stat(out);
  out->open_fds = count_fds();
}
