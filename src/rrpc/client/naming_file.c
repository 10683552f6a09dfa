/* naming_file.c - file://path: one server per line ("addr [tag]", '#'
 * comments). Re-read on every periodic fetch (on the channel's naming
 * thread), so an edit - in place or by renaming a new file over it - takes
 * effect within ns_access_interval_ms. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rrpc/internal/log.h"
#include "rrpc/internal/naming.h"

/* A server line is at most ~150 bytes; comments and blanks get room too.
 * The cap keeps a wrong path (a log, a device) from being read whole. */
#define BYTES_PER_SERVER 1024

static int read_all(int fd, size_t cap, char **out, size_t *len) {
  size_t size = 0, room = 4096;
  char *buf = malloc(room);
  if (buf == NULL) return -ENOMEM;
  for (;;) {
    if (size == room) {
      if (room >= cap) {
        free(buf);
        return -EFBIG;
      }
      room = room * 2 > cap ? cap : room * 2;
      char *nb = realloc(buf, room);
      if (nb == NULL) {
        free(buf);
        return -ENOMEM;
      }
      buf = nb;
    }
    ssize_t r = read(fd, buf + size, room - size);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = -errno;
      free(buf);
      return e;
    }
    if (r == 0) break;
    size += (size_t)r;
  }
  *out = buf;
  *len = size;
  return 0;
}

static int file_fetch(void *arg, const char *path, rrpc_naming_entry *out, size_t max, size_t *n) {
  (void)arg;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -errno;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return -EINVAL;
  }
  char *text = NULL;
  size_t len = 0;
  int rc = read_all(fd, max * BYTES_PER_SERVER + 4096, &text, &len);
  close(fd);
  if (rc != 0) return rc;
  size_t bad = 0;
  rc = rrpc__naming_parse_text(text, len, '\n', out, max, n, &bad);
  free(text);
  if (rc == -EINVAL) RRPC_LOG(WARNING, "naming file %s: line %zu is malformed; list kept", path, bad);
  return rc;
}

const rrpc_naming_service rrpc__naming_file = {.scheme = "file", .fetch = file_fetch, .periodic = 1};
