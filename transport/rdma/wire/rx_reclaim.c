/* wire/rx_reclaim.c - out-of-order release tracking for the receive ring
 * (see rx_reclaim.h). */
#include "transport/rdma/wire/rx_reclaim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void rrpc__rx_reclaim_init(struct rrpc__rx_reclaim *r, uint64_t start,
                           uint32_t max_ranges) {
  memset(r, 0, sizeof(*r));
  r->cons = start;
  r->max_ranges = max_ranges;
}

void rrpc__rx_reclaim_destroy(struct rrpc__rx_reclaim *r) {
  free(r->ranges);
  r->ranges = NULL;
  r->n = r->cap = 0;
}

/* Index of the first range whose start is above s (binary search). */
static uint32_t upper_bound(const struct rrpc__rx_reclaim *r, uint64_t s) {
  uint32_t lo = 0, hi = r->n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (r->ranges[mid].start <= s)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static void remove_at(struct rrpc__rx_reclaim *r, uint32_t i, uint32_t count) {
  memmove(&r->ranges[i], &r->ranges[i + count],
          (size_t)(r->n - i - count) * sizeof(r->ranges[0]));
  r->n -= count;
}

static int grow(struct rrpc__rx_reclaim *r) {
  uint32_t cap;
  struct rrpc__rx_range *p;
  if (r->n < r->cap) return 0;
  if (r->max_ranges != 0 && r->n >= r->max_ranges) return -ENOMEM;
  cap = r->cap ? r->cap * 2 : 8;
  if (cap < r->cap) return -ENOMEM; /* overflow */
  if (r->max_ranges != 0 && cap > r->max_ranges) cap = r->max_ranges;
  p = realloc(r->ranges, (size_t)cap * sizeof(*p));
  if (p == NULL) return -ENOMEM;
  r->ranges = p;
  r->cap = cap;
  return 0;
}

int rrpc__rx_reclaim_release(struct rrpc__rx_reclaim *r, uint64_t start,
                             uint64_t end, uint64_t *advance) {
  uint32_t i;
  int prev_touches, next_touches, rc;

  *advance = 0;
  if (start >= end || start < r->cons) return -EINVAL;
  i = upper_bound(r, start); /* ranges[i - 1].start <= start < ranges[i].start */
  if (i > 0 && r->ranges[i - 1].end > start) return -EINVAL;
  if (i < r->n && r->ranges[i].start < end) return -EINVAL;

  if (start == r->cons) {
    /* The prefix grows: swallow every range it now reaches. Only
     * ranges[0] can touch end, since ranges never touch each other. */
    uint64_t old = r->cons;
    r->cons = end;
    if (r->n > 0 && r->ranges[0].start == end) {
      r->cons = r->ranges[0].end;
      remove_at(r, 0, 1);
    }
    *advance = r->cons - old;
    return 0;
  }

  prev_touches = i > 0 && r->ranges[i - 1].end == start;
  next_touches = i < r->n && r->ranges[i].start == end;
  if (prev_touches && next_touches) {
    r->ranges[i - 1].end = r->ranges[i].end;
    remove_at(r, i, 1);
  } else if (prev_touches) {
    r->ranges[i - 1].end = end;
  } else if (next_touches) {
    r->ranges[i].start = start;
  } else {
    rc = grow(r);
    if (rc != 0) return rc;
    memmove(&r->ranges[i + 1], &r->ranges[i],
            (size_t)(r->n - i) * sizeof(r->ranges[0]));
    r->ranges[i].start = start;
    r->ranges[i].end = end;
    r->n++;
  }
  return 0;
}
