/* preload_policy_fuzzer.c - libFuzzer target for rrpc-run's selection
 * policy (preload/policy.c), which parses environment text a user (or a
 * hostile parent process) gives every preloaded program. Input: up to four
 * NUL-separated fields, RRPC_RUN_PEERS, RRPC_RUN_ONLY, RRPC_RUN_DEBUG,
 * RRPC_RUN_MODE (a missing field is an unset variable); the tail's bytes
 * become query addresses. Any input either fails with a message or gives a
 * policy whose answers are 0 or 1, and an IPv4 peer gets the same answer as
 * its IPv4-mapped IPv6 form. eBPF is never loaded (a fake enable). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preload/policy.h"

enum { FIELDS = 4 };
static const char *const NAMES[FIELDS] = {"RRPC_RUN_PEERS", "RRPC_RUN_ONLY", "RRPC_RUN_DEBUG", "RRPC_RUN_MODE"};
static char *g_fields[FIELDS];
static int g_enable_rc;

static const char *env(const char *name) {
  for (int i = 0; i < FIELDS; i++)
    if (strcmp(name, NAMES[i]) == 0) return g_fields[i];
  return NULL;
}

static int fake_enable(void) { return g_enable_rc; }

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "preload_policy_fuzzer: %s\n", what);
    abort();
  }
}

static void query(const rrpc_run_policy *p, const uint8_t *q, size_t n) {
  uint8_t b[24] = {0};
  memcpy(b, q, n < sizeof b ? n : sizeof b);
  struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = (uint16_t)(b[0] | b[1] << 8)};
  memcpy(&v4.sin_addr, b + 2, 4);
  struct sockaddr_in6 mapped = {.sin6_family = AF_INET6, .sin6_port = v4.sin_port};
  mapped.sin6_addr.s6_addr[10] = mapped.sin6_addr.s6_addr[11] = 0xff;
  memcpy(mapped.sin6_addr.s6_addr + 12, b + 2, 4);
  struct sockaddr_in6 v6 = {.sin6_family = AF_INET6, .sin6_port = v4.sin_port};
  memcpy(&v6.sin6_addr, b + 6, 16);
  const char *comm = (b[22] & 1) ? "redis-server" : NULL;
  int a = rrpc_run_policy_client_may(p, (struct sockaddr *)&v4, sizeof v4, comm);
  int m = rrpc_run_policy_client_may(p, (struct sockaddr *)&mapped, sizeof mapped, comm);
  int s = rrpc_run_policy_server_may(p, (struct sockaddr *)&v6, (struct sockaddr *)&v4, sizeof v6, comm);
  int t = rrpc_run_policy_client_may(p, (struct sockaddr *)&v6, sizeof v6, comm);
  check(a == 0 || a == 1, "client answer not 0/1");
  check(a == m, "IPv4 and IPv4-mapped peers answered differently");
  check(s == 0 || s == 1, "server answer not 0/1");
  check(t == 0 || t == 1, "IPv6 answer not 0/1");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;
  char *copy = malloc(size + 1);
  if (copy == NULL) return 0;
  memcpy(copy, data, size);
  copy[size] = '\0';
  size_t off = 0;
  int i = 0;
  memset(g_fields, 0, sizeof g_fields);
  for (; i < FIELDS && off < size; i++) {
    g_fields[i] = copy + off;
    off += strlen(copy + off) + 1;
  }
  g_enable_rc = size > 0 && (data[0] & 1) ? 0 : -EPERM;
  rrpc_run_policy *p = NULL;
  const char *err = NULL;
  int rc = rrpc__run_policy_parse_ex(env, fake_enable, &p, &err);
  if (rc != 0) {
    check(rc < 0 && err != NULL && strlen(err) > 0, "failure without a message");
  } else {
    check(p != NULL, "success without a policy");
    const char *mode = rrpc_run_policy_mode(p);
    check(strcmp(mode, "ebpf") == 0 || strcmp(mode, "peers") == 0, "unknown mode");
    check(strlen(rrpc_run_policy_note(p)) > 0, "no note");
    for (size_t q = off; q < size; q += 24) query(p, data + q, size - q);
    query(p, data, size);
    rrpc_run_policy_free(p);
  }
  free(copy);
  return 0;
}
