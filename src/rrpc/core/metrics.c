/* metrics.c - the call-figure recorder (internal/metrics.h): per-thread
 * shards of per-second latency histograms, summed on read. Owns nothing but
 * its recorders; who records and who reads is the server's, channel's and
 * builtin pages' business. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rrpc/internal/metrics.h"
#include "rrpc/internal/loop.h"

enum {
  OWNED = 16,                       /* the first 16 recording threads: a shard each */
  SHARED = 8,                       /* later threads share these (still exact: atomics) */
  SHARDS = OWNED + SHARED,
  SLOTS = RRPC_METRICS_WINDOW_S + 1, /* the window plus the second being filled */
  SUB = 8,                          /* buckets per power of two */
  NBUCKETS = 256,                   /* covers up to ~2^34 us; larger go to the last */
  ERR_CODES = 16,
};

/* A second's calls. Their count is the sum of the buckets (summed on read,
 * so an end raises one counter fewer). */
struct slot {
  _Atomic uint64_t sec; /* the second (coarse monotonic) this slot holds */
  _Atomic uint64_t sum_us, max_us;
  _Atomic uint32_t bucket[NBUCKETS];
};

/* A second's slot is allocated the first time a call ends in it, then
 * reused in place: a shard whose thread only begins calls (a caller whose
 * completions run on a loop) or that saw a few calls holds a few hundred
 * bytes, not SLOTS x 1 KiB - a process with thousands of channels keeps
 * two shards per channel (the caller's thread and the loop's), ~23 KiB a
 * channel when every slot was made up front. */
/* Calls ended are the sum of hist[] and calls in flight are begun minus
 * ended, both summed on read: an end then raises the histogram it must raise
 * anyway and no separate call or in-flight counter. */
struct shard {
  _Atomic uint64_t begun, errors;
  _Atomic(struct slot *) slot[SLOTS];
  /* Since the recorder was made (rrpc__call_stats_histogram). */
  _Atomic uint64_t hist[RRPC__LATENCY_BOUNDS + 1], hist_sum_us;
  /* The owner's (tl_shard < OWNED) slot of its last end through end_slow
   * and the first microsecond of that slot's second: ends in the same
   * second skip the slot's look-up. Only the owner thread touches them (it
   * alone empties this shard's slots for new seconds, in end_slow, which
   * sets them again). */
  struct slot *cur;
  uint64_t cur_lo_us;
};

/* 10 us (an RDMA round trip) to 10 s, 1-2.5-5 per decade. */
const uint64_t rrpc__latency_bounds_us[RRPC__LATENCY_BOUNDS] = {
    10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000,
    100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000};

/* The first bound >= us (RRPC__LATENCY_BOUNDS past the last). */
static unsigned hist_bucket_scan(uint64_t us) {
  unsigned i = 0;
  while (i < RRPC__LATENCY_BOUNDS && us > rrpc__latency_bounds_us[i]) i++;
  return i;
}

/* The smallest value of a bucket. */
static uint64_t bucket_lo(unsigned idx) {
  if (idx < SUB) return idx;
  unsigned e = (idx - SUB) / SUB + 3u, sub = (idx - SUB) % SUB;
  return (uint64_t)(SUB + sub) << (e - 3u);
}

/* hist_of_bucket[i]: the since-start bucket of window bucket i's smallest
 * value. A window bucket is at most 1/8 as wide as its values and the bounds
 * are at least 2x apart, so a latency's since-start bucket is that one or
 * the next: one lookup and one comparison per record instead of a scan of
 * the bounds below it. Filled once, before any recorder exists. */
static uint8_t hist_of_bucket[NBUCKETS];
static pthread_once_t hist_of_bucket_once = PTHREAD_ONCE_INIT;

static void hist_of_bucket_fill(void) {
  for (unsigned i = 0; i < NBUCKETS; i++) hist_of_bucket[i] = (uint8_t)hist_bucket_scan(bucket_lo(i));
}

static unsigned hist_bucket_of(uint64_t us, unsigned bucket) {
  unsigned h = hist_of_bucket[bucket];
  return h < RRPC__LATENCY_BOUNDS && us > rrpc__latency_bounds_us[h] ? h + 1 : h;
}

struct err_entry {
  atomic_int code; /* 0 = free */
  _Atomic uint64_t n;
};

struct rrpc__call_stats {
  _Atomic(struct shard *) shard[SHARDS];
  uint64_t created_us;
  /* Recorders whose calls count in this one's figures too, summed on read
   * (rrpc__call_stats_add_part): a call is recorded once, into its part. */
  const rrpc__call_stats **parts;
  size_t nparts;
  struct err_entry err[ERR_CODES];
  _Atomic uint64_t err_other;
};

atomic_int rrpc__metrics_switch = 1; /* internal/metrics.h */
static atomic_int g_next_thread;
static _Thread_local int tl_shard RRPC__TLS_IE = -1;
/* tl_shard < OWNED: only this thread writes its shard, so its counters are
 * raised with a load and a store; no locked read-modify-write (six of them
 * per recorder per call were ~3 % of a call's CPU at saturation). Readers
 * still load them atomically. The recording functions take `owned` as a
 * constant (each is inlined once per case), so the test is made once per
 * record, not once per counter: an atomic access is a barrier to the
 * compiler, which would otherwise reload the thread-local each time. */
#define OWNED_SHARD() (tl_shard < OWNED)
#define RECORD_FN static inline __attribute__((always_inline))

void rrpc_metrics_set_enabled(int on) { atomic_store_explicit(&rrpc__metrics_switch, on != 0, memory_order_relaxed); }
int rrpc_metrics_enabled(void) { return atomic_load_explicit(&rrpc__metrics_switch, memory_order_relaxed); }

/* The coarse clock costs a few ns (no syscall) and a second is all a slot
 * needs to know. */
/* The second a call ended in. A loop thread (or a worker that lent its
 * clock read, rrpc__round_lend) has the round's clock already: no clock
 * call, which even the coarse clock's vDSO read is (two per RPC, one each
 * side). Elsewhere the coarse clock. Either is at most the reader's fine
 * clock read after it, so a record never lands in a second the reader
 * thinks is still to come. */
static uint64_t end_sec(void) {
  uint64_t round_us = rrpc__tls_round_us;
  if (round_us != 0) return round_us / 1000000u;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec;
}

int rrpc__call_stats_new(rrpc__call_stats **out) {
  pthread_once(&hist_of_bucket_once, hist_of_bucket_fill);
  rrpc__call_stats *s = calloc(1, sizeof *s);
  if (s == NULL) return -ENOMEM;
  s->created_us = rrpc__now_us();
  *out = s;
  return 0;
}

void rrpc__call_stats_free(rrpc__call_stats *s) {
  if (s == NULL) return;
  for (int i = 0; i < SHARDS; i++) {
    struct shard *sh = atomic_load(&s->shard[i]);
    if (sh == NULL) continue;
    for (int k = 0; k < SLOTS; k++) free(atomic_load(&sh->slot[k]));
    free(sh);
  }
  free(s->parts);
  free(s);
}

int rrpc__call_stats_add_part(rrpc__call_stats *whole, const rrpc__call_stats *part) {
  const rrpc__call_stats **np = realloc(whole->parts, (whole->nparts + 1) * sizeof *np);
  if (np == NULL) return -ENOMEM;
  np[whole->nparts++] = part;
  whole->parts = np;
  return 0;
}

/* The shard index this thread records into, picked on its first record. */
static void pick_shard(void) {
  int i = atomic_fetch_add_explicit(&g_next_thread, 1, memory_order_relaxed);
  tl_shard = i < OWNED ? i : OWNED + (i - OWNED) % SHARED;
}

/* This thread's shard (tl_shard is picked), allocated on its first record.
 * NULL only when memory is short (the record is then dropped rather than
 * blocking or failing). The lookup is inlined into every record, the
 * allocation is not. */
static __attribute__((noinline)) struct shard *new_shard(rrpc__call_stats *s) {
  struct shard *fresh = calloc(1, sizeof *fresh);
  if (fresh == NULL) return NULL;
  struct shard *expected = NULL;
  if (atomic_compare_exchange_strong_explicit(&s->shard[tl_shard], &expected, fresh,
                                              memory_order_acq_rel, memory_order_acquire))
    return fresh;
  free(fresh); /* another thread of this shard won */
  return expected;
}

RECORD_FN struct shard *my_shard(rrpc__call_stats *s) {
  struct shard *sh = atomic_load_explicit(&s->shard[tl_shard], memory_order_acquire);
  return sh != NULL ? sh : new_shard(s);
}

/* Log-linear: values below SUB exactly, then SUB buckets per power of two. */
static unsigned bucket_of(uint64_t v) {
  if (v < SUB) return (unsigned)v;
  unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= 3 */
  unsigned idx = SUB + (e - 3u) * SUB + (unsigned)((v >> (e - 3u)) & (SUB - 1));
  return idx < NBUCKETS ? idx : NBUCKETS - 1;
}

/* The middle of a bucket, the value a percentile falling in it reports. */
static uint64_t bucket_mid(unsigned idx) {
  if (idx < SUB) return idx;
  unsigned e = (idx - SUB) / SUB + 3u, sub = (idx - SUB) % SUB;
  uint64_t lo = (uint64_t)(SUB + sub) << (e - 3u), width = (uint64_t)1 << (e - 3u);
  return lo + width / 2;
}

/* Raise a counter of this thread's shard (`owned`: see OWNED_SHARD); any
 * atomic integer type (the C11 generic operations). */
#define SHARD_ADD(owned, a, v)                                                                       \
  do {                                                                                               \
    if (owned)                                                                                       \
      atomic_store_explicit((a), atomic_load_explicit((a), memory_order_relaxed) + (v),              \
                            memory_order_relaxed);                                                   \
    else                                                                                             \
      atomic_fetch_add_explicit((a), (v), memory_order_relaxed);                                     \
  } while (0)

void rrpc__call_stats_begin(rrpc__call_stats *s) {
  if (!rrpc__metrics_on() || s == NULL) return;
  if (tl_shard < 0) pick_shard();
  struct shard *sh = my_shard(s);
  if (sh == NULL) return;
  if (OWNED_SHARD()) SHARD_ADD(1, &sh->begun, 1);
  else SHARD_ADD(0, &sh->begun, 1);
}

static void count_error(rrpc__call_stats *s, int code) {
  for (int i = 0; i < ERR_CODES; i++) {
    int cur = atomic_load_explicit(&s->err[i].code, memory_order_acquire);
    if (cur == 0) {
      int zero = 0;
      if (atomic_compare_exchange_strong(&s->err[i].code, &zero, code)) cur = code;
      else cur = zero;
    }
    if (cur == code) {
      atomic_fetch_add_explicit(&s->err[i].n, 1, memory_order_relaxed);
      return;
    }
  }
  atomic_fetch_add_explicit(&s->err_other, 1, memory_order_relaxed);
}

RECORD_FN void atomic_max(_Atomic uint64_t *a, uint64_t v, int owned) {
  uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
  if (owned) {
    if (cur < v) atomic_store_explicit(a, v, memory_order_relaxed);
    return;
  }
  while (cur < v && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
                                                           memory_order_relaxed)) {
  }
}

/* One finished call. */
struct record {
  uint64_t lat, sec;
  unsigned slot; /* sec % SLOTS */
  unsigned bucket, hist_bucket;
  int code;
};

/* The slot for r->sec's place, allocated on its first use (NULL only when
 * memory is short: the record is then dropped from the window). Published
 * with its second already set, so a reader never sees a fresh slot as an
 * old second's. */
static __attribute__((noinline)) struct slot *new_slot(struct shard *sh, const struct record *r) {
  _Atomic(struct slot *) *at = &sh->slot[r->slot];
  struct slot *sl = NULL;
  struct slot *fresh = calloc(1, sizeof *fresh);
  if (fresh == NULL) return NULL;
  atomic_store_explicit(&fresh->sec, r->sec, memory_order_relaxed);
  if (atomic_compare_exchange_strong_explicit(at, &sl, fresh, memory_order_acq_rel, memory_order_acquire))
    return fresh;
  free(fresh); /* another thread of this shard won */
  return sl;
}

/* A second that left the window: its slot emptied for r->sec. Two threads
 * sharing the shard may both clear; at worst a record of this very second
 * is lost. */
static __attribute__((noinline)) void reuse_slot(struct slot *sl, const struct record *r) {
  atomic_store_explicit(&sl->sum_us, 0, memory_order_relaxed);
  atomic_store_explicit(&sl->max_us, 0, memory_order_relaxed);
  for (int i = 0; i < NBUCKETS; i++) atomic_store_explicit(&sl->bucket[i], 0, memory_order_relaxed);
  atomic_store_explicit(&sl->sec, r->sec, memory_order_release);
}

/* The slot of r->sec, emptied first if it still holds a second that left
 * the window (reuse_slot). */
RECORD_FN struct slot *slot_for(struct shard *sh, const struct record *r) {
  struct slot *sl = atomic_load_explicit(&sh->slot[r->slot], memory_order_acquire);
  if (sl == NULL && (sl = new_slot(sh, r)) == NULL) return NULL;
  if (atomic_load_explicit(&sl->sec, memory_order_relaxed) != r->sec) reuse_slot(sl, r);
  return sl;
}

/* A call's latency into its second's slot (when there is one) and the
 * since-start histogram: what every end raises, failed or not. */
RECORD_FN void add_latency(struct shard *sh, struct slot *sl, uint64_t lat, unsigned bucket,
                           unsigned hist_bucket, int owned) {
  if (sl != NULL) {
    SHARD_ADD(owned, &sl->sum_us, lat);
    SHARD_ADD(owned, &sl->bucket[bucket], 1);
    atomic_max(&sl->max_us, lat, owned);
  }
  SHARD_ADD(owned, &sh->hist[hist_bucket], 1);
  SHARD_ADD(owned, &sh->hist_sum_us, lat);
}

RECORD_FN void end_in(struct shard *sh, const struct record *r, int owned) {
  add_latency(sh, slot_for(sh, r), r->lat, r->bucket, r->hist_bucket, owned);
  if (r->code != 0) SHARD_ADD(owned, &sh->errors, 1);
}

/* Any end: a shared shard, a failed call, a thread without the round's
 * clock, a slot to make or to empty. */
static __attribute__((noinline)) void end_slow(rrpc__call_stats *s, int64_t latency_us, int code) {
  if (tl_shard < 0) pick_shard();
  struct shard *sh = my_shard(s);
  if (sh == NULL) return;
  struct record r = {.lat = latency_us > 0 ? (uint64_t)latency_us : 0, .code = code};
  r.sec = end_sec();
  r.slot = (unsigned)(r.sec % SLOTS);
  r.bucket = bucket_of(r.lat);
  r.hist_bucket = hist_bucket_of(r.lat, r.bucket);
  if (OWNED_SHARD()) {
    end_in(sh, &r, 1);
    sh->cur = atomic_load_explicit(&sh->slot[r.slot], memory_order_relaxed);
    sh->cur_lo_us = r.sec * 1000000u;
  } else {
    end_in(sh, &r, 0);
  }
  if (code != 0) count_error(s, code);
}

void rrpc__call_stats_end(rrpc__call_stats *s, int64_t latency_us, int code) {
  if (!rrpc__metrics_on() || s == NULL) return;
  /* The usual end, with no call in it (so no registers saved for one): a
   * successful call ended on a thread with its own shard that holds the
   * round's clock (a loop thread, a worker that lent its read), in the
   * second of its last slot (shard.cur). */
  int t = tl_shard;
  uint64_t round_us = rrpc__tls_round_us;
  if ((unsigned)t >= OWNED || code != 0 || round_us == 0) {
    end_slow(s, latency_us, code);
    return;
  }
  struct shard *sh = atomic_load_explicit(&s->shard[t], memory_order_acquire);
  struct slot *sl = sh != NULL ? sh->cur : NULL;
  if (sl == NULL || round_us - sh->cur_lo_us >= 1000000u) {
    end_slow(s, latency_us, code);
    return;
  }
  uint64_t lat = latency_us > 0 ? (uint64_t)latency_us : 0;
  unsigned bucket = bucket_of(lat);
  add_latency(sh, sl, lat, bucket, hist_bucket_of(lat, bucket), 1);
}

/* The calls a shard saw end: every end raises exactly one hist[] bucket. */
static uint64_t shard_ended(const struct shard *sh) {
  uint64_t n = 0;
  for (int b = 0; b <= RRPC__LATENCY_BOUNDS; b++) n += atomic_load_explicit(&sh->hist[b], memory_order_relaxed);
  return n;
}

/* The value below which `q` of the window's calls fall. */
static uint64_t percentile(const uint64_t *b, uint64_t n, double q) {
  if (n == 0) return 0;
  uint64_t rank = (uint64_t)(q * (double)n);
  if (rank >= n) rank = n - 1;
  uint64_t seen = 0;
  for (unsigned i = 0; i < NBUCKETS; i++) {
    seen += b[i];
    if (seen > rank) return bucket_mid(i);
  }
  return bucket_mid(NBUCKETS - 1);
}

/* A read's sums over one recorder's shards and then its parts'. */
struct sums {
  uint64_t b[NBUCKETS];
  uint64_t ended, errors, begun, n, sum, max;
};

static void sum_one(const rrpc__call_stats *s, uint64_t sec, struct sums *t) {
  for (int i = 0; i < SHARDS; i++) {
    const struct shard *sh = atomic_load_explicit(&s->shard[i], memory_order_acquire);
    if (sh == NULL) continue;
    t->ended += shard_ended(sh);
    t->errors += atomic_load_explicit(&sh->errors, memory_order_relaxed);
    for (int k = 0; k < SLOTS; k++) {
      const struct slot *sl = atomic_load_explicit(&sh->slot[k], memory_order_acquire);
      if (sl == NULL) continue;
      uint64_t ssec = atomic_load_explicit(&sl->sec, memory_order_acquire);
      if (ssec > sec || sec - ssec >= RRPC_METRICS_WINDOW_S) continue;
      uint64_t sn = 0;
      for (int j = 0; j < NBUCKETS; j++) {
        uint64_t c = atomic_load_explicit(&sl->bucket[j], memory_order_relaxed);
        t->b[j] += c;
        sn += c;
      }
      if (sn == 0) continue;
      t->n += sn;
      t->sum += atomic_load_explicit(&sl->sum_us, memory_order_relaxed);
      uint64_t m = atomic_load_explicit(&sl->max_us, memory_order_relaxed);
      if (m > t->max) t->max = m;
    }
  }
}

/* Begun read after ended (see rrpc__call_stats_read). */
static uint64_t begun_one(const rrpc__call_stats *s) {
  uint64_t begun = 0;
  for (int i = 0; i < SHARDS; i++) {
    const struct shard *sh = atomic_load_explicit(&s->shard[i], memory_order_acquire);
    if (sh != NULL) begun += atomic_load_explicit(&sh->begun, memory_order_relaxed);
  }
  return begun;
}

void rrpc__call_stats_read(const rrpc__call_stats *s, rrpc_call_stats *out) {
  memset(out, 0, sizeof *out);
  if (s == NULL) return;
  uint64_t now_us = rrpc__now_us(), sec = now_us / 1000000u; /* fine: never behind a writer's */
  struct sums t;
  memset(&t, 0, sizeof t);
  sum_one(s, sec, &t);
  for (size_t p = 0; p < s->nparts; p++) sum_one(s->parts[p], sec, &t);
  out->calls = t.ended;
  out->errors = t.errors;
  /* Begun read after ended, so a call that begins and ends while this reads
   * tends to count in both rather than as ended only. The difference is a
   * snapshot of relaxed counters on many threads, not exact; below zero
   * (metrics switched on during a call: ended, never begun) it reads 0. */
  uint64_t begun = begun_one(s);
  for (size_t p = 0; p < s->nparts; p++) begun += begun_one(s->parts[p]);
  out->in_flight = begun > out->calls ? (int64_t)(begun - out->calls) : 0;
  /* The window is the current partial second plus the full ones before it,
   * no longer than the recorder has existed. */
  double span = (double)(RRPC_METRICS_WINDOW_S - 1) + (double)(now_us % 1000000u) / 1e6;
  double age = (double)(now_us - s->created_us) / 1e6;
  if (age < span) span = age;
  if (span < 1e-3) span = 1e-3;
  uint64_t n = t.n, max = t.max;
  out->window_calls = n;
  out->qps = (double)n / span;
  out->latency_avg_us = n ? t.sum / n : 0;
  out->latency_p50_us = percentile(t.b, n, 0.50);
  out->latency_p90_us = percentile(t.b, n, 0.90);
  out->latency_p99_us = percentile(t.b, n, 0.99);
  out->latency_p999_us = percentile(t.b, n, 0.999);
  out->latency_max_us = max;
  /* A percentile reports its bucket's middle, which can pass the largest
   * value actually seen (p999 above max); the largest is exact. */
  uint64_t *pct[] = {&out->latency_p50_us, &out->latency_p90_us, &out->latency_p99_us, &out->latency_p999_us};
  for (size_t i = 0; i < sizeof pct / sizeof pct[0]; i++)
    if (*pct[i] > max) *pct[i] = max;
}

static void histogram_add(const rrpc__call_stats *s, rrpc__latency_hist *out) {
  for (int i = 0; i < SHARDS; i++) {
    const struct shard *sh = atomic_load_explicit(&s->shard[i], memory_order_acquire);
    if (sh == NULL) continue;
    for (int b = 0; b <= RRPC__LATENCY_BOUNDS; b++)
      out->count[b] += atomic_load_explicit(&sh->hist[b], memory_order_relaxed);
    out->sum_us += atomic_load_explicit(&sh->hist_sum_us, memory_order_relaxed);
  }
}

void rrpc__call_stats_histogram(const rrpc__call_stats *s, rrpc__latency_hist *out) {
  memset(out, 0, sizeof *out);
  if (s == NULL) return;
  histogram_add(s, out);
  for (size_t p = 0; p < s->nparts; p++) histogram_add(s->parts[p], out);
}

/* Failed calls by code over a recorder and its parts: each code once, in
 * the order the recorders first saw them; as in one recorder, codes past
 * ERR_CODES distinct ones count as "other". */
struct code_sums {
  int code[ERR_CODES];
  uint64_t n[ERR_CODES];
  int ncodes;
  uint64_t other;
};

static void code_sums_add(struct code_sums *t, int code, uint64_t n) {
  for (int i = 0; i < t->ncodes; i++) {
    if (t->code[i] == code) {
      t->n[i] += n;
      return;
    }
  }
  if (t->ncodes == ERR_CODES) {
    t->other += n;
    return;
  }
  t->code[t->ncodes] = code;
  t->n[t->ncodes++] = n;
}

static void code_sums_of(const rrpc__call_stats *s, struct code_sums *t) {
  for (int i = 0; i < ERR_CODES; i++) {
    int code = atomic_load_explicit(&s->err[i].code, memory_order_acquire);
    if (code == 0) break;
    code_sums_add(t, code, atomic_load_explicit(&s->err[i].n, memory_order_relaxed));
  }
  t->other += atomic_load_explicit(&s->err_other, memory_order_relaxed);
}

void rrpc__call_stats_errors(const rrpc__call_stats *s, rrpc__code_count_fn fn, void *ctx) {
  if (s == NULL) return;
  struct code_sums t = {.ncodes = 0, .other = 0};
  code_sums_of(s, &t);
  for (size_t p = 0; p < s->nparts; p++) code_sums_of(s->parts[p], &t);
  for (int i = 0; i < t.ncodes; i++) fn(ctx, t.code[i], t.n[i]);
  if (t.other) fn(ctx, 0, t.other);
}

static uint64_t error_count_one(const rrpc__call_stats *s, int code) {
  for (int i = 0; i < ERR_CODES; i++)
    if (atomic_load_explicit(&s->err[i].code, memory_order_acquire) == code)
      return atomic_load_explicit(&s->err[i].n, memory_order_relaxed);
  return 0;
}

uint64_t rrpc__call_stats_error_count(const rrpc__call_stats *s, int code) {
  if (s == NULL) return 0;
  uint64_t n = error_count_one(s, code);
  for (size_t p = 0; p < s->nparts; p++) n += error_count_one(s->parts[p], code);
  return n;
}

/* ---- fallbacks by decline code -------------------------------------------- */

enum { FALLBACK_CODES = 32 };
static struct {
  _Atomic uint32_t code_plus1; /* 0 = free; decline codes may be 0 */
  _Atomic uint64_t n;
} g_fallback[FALLBACK_CODES];
static _Atomic uint64_t g_fallback_other;

void rrpc__metrics_note_fallback(uint32_t code) {
  uint32_t key = code + 1u;
  for (int i = 0; i < FALLBACK_CODES; i++) {
    uint32_t cur = atomic_load_explicit(&g_fallback[i].code_plus1, memory_order_acquire);
    if (cur == 0) {
      uint32_t zero = 0;
      cur = atomic_compare_exchange_strong(&g_fallback[i].code_plus1, &zero, key) ? key : zero;
    }
    if (cur == key) {
      atomic_fetch_add_explicit(&g_fallback[i].n, 1, memory_order_relaxed);
      return;
    }
  }
  atomic_fetch_add_explicit(&g_fallback_other, 1, memory_order_relaxed);
}

void rrpc__metrics_fallbacks(void (*fn)(void *ctx, uint32_t code, uint64_t n), void *ctx) {
  for (int i = 0; i < FALLBACK_CODES; i++) {
    uint32_t key = atomic_load_explicit(&g_fallback[i].code_plus1, memory_order_acquire);
    if (key == 0) break;
    fn(ctx, key - 1u, atomic_load_explicit(&g_fallback[i].n, memory_order_relaxed));
  }
  uint64_t other = atomic_load_explicit(&g_fallback_other, memory_order_relaxed);
  if (other) fn(ctx, 0, other);
}
