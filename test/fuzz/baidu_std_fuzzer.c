/* baidu_std_fuzzer.c - libFuzzer target for the baidu_std codecs: arbitrary
 * bytes through rrpc__rpc_meta_decode (what decodes must re-encode and decode
 * to the same values) and through rrpc__baidu_cut in a chunking chosen by the
 * first input byte (it must give the same frames and the same final result as
 * one cut over the whole input; every frame must pack and cut back). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/internal/baidu_std.h"

#define MAX_FRAMES 4096

static int str_same(rrpc__str a, rrpc__str b) {
  return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* The values an encode round trip must keep: the encoder only writes
 * sub-message bits inside their message, so compare those bits there. */
static int meta_same(const rrpc__rpc_meta *a, const rrpc__rpc_meta *b) {
  if (a->has != b->has)
    return 0;
  if ((a->has & RRPC_META_HAS_REQUEST) &&
      (!str_same(a->service_name, b->service_name) || !str_same(a->method_name, b->method_name)))
    return 0;
  if ((a->has & RRPC_META_HAS_LOG_ID) && a->log_id != b->log_id)
    return 0;
  if ((a->has & RRPC_META_HAS_TIMEOUT_MS) && a->timeout_ms != b->timeout_ms)
    return 0;
  if ((a->has & RRPC_META_HAS_ERROR_CODE) && a->error_code != b->error_code)
    return 0;
  if ((a->has & RRPC_META_HAS_ERROR_TEXT) && !str_same(a->error_text, b->error_text))
    return 0;
  if ((a->has & RRPC_META_HAS_COMPRESS_TYPE) && a->compress_type != b->compress_type)
    return 0;
  if ((a->has & RRPC_META_HAS_CORRELATION_ID) && a->correlation_id != b->correlation_id)
    return 0;
  if ((a->has & RRPC_META_HAS_ATTACHMENT_SIZE) && a->attachment_size != b->attachment_size)
    return 0;
  return 1;
}

/* Decoded meta -> encode -> decode must give the same values, and the
 * re-encoding of that must be the same bytes (the encoding is canonical). */
static void check_meta_round_trip(const rrpc__rpc_meta *m) {
  size_t n = rrpc__rpc_meta_size(m);
  uint8_t *buf = malloc(n ? n : 1);
  uint8_t *buf2 = malloc(n ? n : 1);
  rrpc__rpc_meta again;
  if (buf == NULL || buf2 == NULL)
    abort();
  if (rrpc__rpc_meta_encode(m, buf) != n)
    abort();
  if (rrpc__rpc_meta_decode(buf, n, &again) != 0)
    abort();
  if (!meta_same(m, &again))
    abort();
  if (rrpc__rpc_meta_size(&again) != n || rrpc__rpc_meta_encode(&again, buf2) != n ||
      memcmp(buf, buf2, n) != 0)
    abort();
  /* The one-pass encoder (pack's small frames): it declines, or it writes
   * the same bytes within its bound. */
  uint8_t short_buf[RRPC_META_SHORT_MAX];
  size_t ns = rrpc__rpc_meta_encode_short(m, short_buf);
  if (ns != 0 && (ns != n || ns > RRPC_META_SHORT_MAX || memcmp(short_buf, buf, n) != 0))
    abort();
  free(buf);
  free(buf2);
}

/* Every field, pointers included: the two paths borrow from the same bytes. */
static int meta_identical(const rrpc__rpc_meta *a, const rrpc__rpc_meta *b) {
  return a->has == b->has && a->service_name.ptr == b->service_name.ptr &&
         a->service_name.len == b->service_name.len && a->method_name.ptr == b->method_name.ptr &&
         a->method_name.len == b->method_name.len && a->log_id == b->log_id && a->timeout_ms == b->timeout_ms &&
         a->error_code == b->error_code && a->error_text.ptr == b->error_text.ptr &&
         a->error_text.len == b->error_text.len && a->compress_type == b->compress_type &&
         a->correlation_id == b->correlation_id && a->attachment_size == b->attachment_size;
}

/* rrpc__rpc_meta_decode (fast path, then the general decoder) must answer
 * exactly as the general decoder alone; the fast path alone either agrees
 * or declines with -EAGAIN and a zeroed meta. `got` is decode's answer. */
static void check_fast_agrees(const uint8_t *p, size_t n, const rrpc__rpc_meta *got) {
  static const rrpc__rpc_meta zero;
  rrpc__rpc_meta general, fast;
  int rc_d = rrpc__rpc_meta_decode(p, n, &fast);
  int rc_g = rrpc__rpc_meta_decode_general(p, n, &general);
  if (rc_d != rc_g || !meta_identical(&fast, &general) || !meta_identical(got, &general))
    abort();
  int rc_f = rrpc__rpc_meta_decode_fast(p, n, &fast);
  if (rc_f == 0 ? rc_g != 0 || !meta_identical(&fast, &general)
                : rc_f != -EAGAIN || !meta_identical(&fast, &zero))
    abort();
}

/* What one cut frame looked like, to compare chunkings. */
typedef struct frame_sum {
  size_t payload_len;
  size_t att_len;
  int64_t correlation_id;
  uint32_t has;
  int bad_attachment;
} frame_sum;

typedef struct cut_run {
  frame_sum frames[MAX_FRAMES];
  size_t count;
  int final_rc; /* 0 = ran out of bytes, or the error that stopped it */
  size_t consumed; /* bytes taken out of the stream by cut frames */
} cut_run;

static void check_frame(const rrpc__baidu_msg *msg) {
  size_t pay = rrpc_iobuf_length(&msg->payload);
  size_t att = rrpc_iobuf_length(&msg->attachment);
  rrpc__rpc_meta m = msg->meta;
  rrpc_iobuf wire;
  rrpc__baidu_msg back;
  int rc;

  check_meta_round_trip(&msg->meta);
  if (msg->bad_attachment) {
    if (att != 0 || !(m.has & RRPC_META_HAS_ATTACHMENT_SIZE))
      abort();
    if (m.attachment_size > 0 && (size_t)m.attachment_size <= pay)
      abort();
    return;
  }
  if ((m.has & RRPC_META_HAS_ATTACHMENT_SIZE) ? (size_t)(uint32_t)m.attachment_size != att
                                              : att != 0)
    abort();

  /* Pack it again and cut it again: same meta values, same bytes. */
  rrpc__iobuf_init(&wire);
  rc = rrpc__baidu_pack(&wire, &m, &msg->payload, &msg->attachment);
  if (rc != 0)
    abort();
  /* No limit here: a canonical int32 can be longer than what was sent (a
   * negative value sent in 5 bytes comes back in 10). */
  rc = rrpc__baidu_cut(&wire, UINT32_MAX, &back);
  if (rc != 1 || rrpc_iobuf_length(&wire) != 0 || back.bad_attachment)
    abort();
  if (!meta_same(&m, &back.meta))
    abort();
  if (rrpc_iobuf_length(&back.payload) != pay || rrpc_iobuf_length(&back.attachment) != att)
    abort();
  {
    uint8_t *tmp = malloc(pay + att + 1);
    if (tmp == NULL)
      abort();
    rrpc_iobuf_copy_out(&back.payload, 0, tmp, pay);
    rrpc_iobuf_copy_out(&back.attachment, 0, tmp + pay, att);
    if (!rrpc_iobuf_equals(&msg->payload, tmp, pay) ||
        !rrpc_iobuf_equals(&msg->attachment, tmp + pay, att))
      abort();
    free(tmp);
  }
  rrpc__baidu_msg_destroy(&back);
  rrpc__iobuf_destroy(&wire);
}

/* Cut everything that can be cut from `in`, recording the frames. Returns 0
 * when more bytes are needed, or the error (then the stream is dead). */
static int cut_all(rrpc_iobuf *in, size_t max_body, cut_run *run) {
  for (;;) {
    rrpc__baidu_msg msg;
    size_t before = rrpc_iobuf_length(in);
    int rc = rrpc__baidu_cut(in, max_body, &msg);
    if (rc <= 0) {
      if (rrpc_iobuf_length(in) != before || msg.meta_bytes != NULL || msg.meta_block != NULL ||
          rrpc_iobuf_length(&msg.payload) != 0)
        abort(); /* need-more and errors consume nothing, leave *out empty */
      if (rc < 0 && rc != -RRPC_EPARSE && rc != -RRPC_ETOOBIG)
        abort();
      return rc;
    }
    if (run->count < MAX_FRAMES) {
      frame_sum *f = &run->frames[run->count];
      f->payload_len = rrpc_iobuf_length(&msg.payload);
      f->att_len = rrpc_iobuf_length(&msg.attachment);
      f->correlation_id = msg.meta.correlation_id;
      f->has = msg.meta.has;
      f->bad_attachment = msg.bad_attachment;
    }
    run->count++;
    check_frame(&msg);
    /* The meta may be read in place: its strings must outlive the
     * payload and attachment (the message keeps their block; ASan reports
     * a freed one). */
    rrpc_iobuf_clear(&msg.payload);
    rrpc_iobuf_clear(&msg.attachment);
    check_meta_round_trip(&msg.meta);
    rrpc__baidu_msg_destroy(&msg);
  }
}

/* A small deterministic generator for chunk sizes. */
static uint32_t next_rand(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

static void run_cut(const uint8_t *data, size_t size, uint8_t mode, int chunked, cut_run *run) {
  /* Small limits make ETOOBIG reachable with small inputs. */
  static const size_t limits[4] = {0, 16, 200, 4096};
  size_t max_body = limits[(mode >> 6) & 3];
  uint32_t seed = mode;
  rrpc_iobuf in;
  size_t pos = 0;

  memset(run, 0, sizeof(*run));
  rrpc__iobuf_init(&in);
  while (pos < size) {
    size_t n = size - pos;
    if (chunked) {
      switch (mode & 3) {
      case 0:
        n = 1;
        break;
      case 1:
        n = 1 + next_rand(&seed) % 16;
        break;
      default:
        n = 1 + next_rand(&seed) % (1u + (mode & 0x3c) * 8u);
        break;
      }
      if (n > size - pos)
        n = size - pos;
    }
    if (rrpc_iobuf_append(&in, data + pos, n) != 0)
      abort();
    pos += n;
    run->final_rc = cut_all(&in, max_body, run);
    if (run->final_rc < 0)
      break;
  }
  run->consumed = pos - rrpc_iobuf_length(&in);
  rrpc__iobuf_destroy(&in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Blocks straight from malloc and back to free, so that ASan sees a block
 * freed too early (the default allocator caches freed blocks). */
static int plain_alloc(void *ctx, size_t size, void **data, size_t *cap, void **region) {
  (void)ctx;
  *data = malloc(size);
  *cap = size;
  *region = NULL;
  return *data != NULL ? 0 : -ENOMEM;
}

static void plain_free(void *ctx, void *data, size_t cap, void *region) {
  (void)ctx;
  (void)cap;
  (void)region;
  free(data);
}

static const rrpc_block_allocator plain_allocator = {
    .name = "fuzz-plain", .alloc = plain_alloc, .free = plain_free, .ctx = NULL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static cut_run whole, chunked;
  rrpc__rpc_meta m;
  uint8_t *exact;

  rrpc_block_allocator_set(&plain_allocator);
  /* 1. The meta codec, on an exact-size heap copy so ASan sees over-reads. */
  exact = malloc(size ? size : 1);
  if (exact == NULL)
    abort();
  memcpy(exact, data, size);
  if (rrpc__rpc_meta_decode(exact, size, &m) == 0)
    check_meta_round_trip(&m);
  else if (m.has != 0)
    abort();
  check_fast_agrees(exact, size, &m);
  free(exact);

  /* 2. Frames: the first byte picks the chunking and the body limit. */
  if (size == 0)
    return 0;
  run_cut(data + 1, size - 1, data[0], 0, &whole);
  run_cut(data + 1, size - 1, data[0], 1, &chunked);
  if (whole.count != chunked.count || whole.final_rc != chunked.final_rc ||
      whole.consumed != chunked.consumed)
    abort();
  for (size_t i = 0; i < whole.count && i < MAX_FRAMES; i++) {
    const frame_sum *a = &whole.frames[i], *b = &chunked.frames[i];
    if (a->payload_len != b->payload_len || a->att_len != b->att_len ||
        a->correlation_id != b->correlation_id || a->has != b->has ||
        a->bad_attachment != b->bad_attachment)
      abort();
  }
  return 0;
}
