/* transport/smc/smc_config.c - UEIDs and pnet table for kernel SMC-R peers
 * (smc_config.h): parsing, matching, and the process-wide copy. */
#include "transport/smc/smc_config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/rdma.h"

static int upper_alnum(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

int rrpc__smc_ueid_pad(const char *eid, uint8_t out[RRPC_SMC_EID_LEN]) {
  size_t n = strlen(eid), i;
  while (n > 0 && eid[n - 1] == ' ') n--;
  if (n == 0 || n > RRPC_SMC_EID_LEN || !upper_alnum(eid[0])) return -EINVAL;
  for (i = 1; i < n; i++)
    if (!upper_alnum(eid[i]) && eid[i] != '.' && eid[i] != '-') return -EINVAL;
  memset(out, ' ', RRPC_SMC_EID_LEN);
  memcpy(out, eid, n);
  return 0;
}

/* Copies the next comma-separated item of *s into item (cap bytes); -EINVAL
 * when it does not fit. Advances *s past the comma. */
static int next_item(const char **s, char *item, size_t cap) {
  const char *comma = strchr(*s, ',');
  size_t n = comma != NULL ? (size_t)(comma - *s) : strlen(*s);
  if (n >= cap) return -EINVAL;
  memcpy(item, *s, n);
  item[n] = '\0';
  *s = comma != NULL ? comma + 1 : *s + n;
  return 0;
}

int rrpc__smc_parse_ueids(const char *csv, struct rrpc__smc_config *cfg, const char **why) {
  uint8_t eids[RRPC_SMC_MAX_UEIDS][RRPC_SMC_EID_LEN];
  char item[RRPC_SMC_EID_LEN + 2];
  size_t count = 0, i;
  const char *s = csv != NULL ? csv : "";
  while (*s != '\0') {
    if (count == RRPC_SMC_MAX_UEIDS) { *why = "more than 4 UEIDs (the kernel keeps 4)"; return -EINVAL; }
    if (next_item(&s, item, sizeof(item)) != 0 || rrpc__smc_ueid_pad(item, eids[count]) != 0) {
      *why = "a UEID has 1 to 32 characters: A-Z and 0-9 first, then also '.' and '-'";
      return -EINVAL;
    }
    for (i = 0; i < count; i++)
      if (memcmp(eids[i], eids[count], RRPC_SMC_EID_LEN) == 0) { *why = "a UEID is listed twice"; return -EINVAL; }
    count++;
  }
  memcpy(cfg->ueids, eids, sizeof(eids));
  cfg->ueid_count = (uint8_t)count;
  return 0;
}

/* "NETDEV=IBDEV[:PORT]" */
static int parse_pnet_entry(const char *item, struct rrpc__smc_pnet_entry *e) {
  const char *eq = strchr(item, '='), *colon;
  size_t n;
  long port = 1;
  if (eq == NULL || eq == item || (size_t)(eq - item) >= RRPC_SMC_NAME_LEN) return -EINVAL;
  memset(e, 0, sizeof(*e));
  memcpy(e->netdev, item, (size_t)(eq - item));
  colon = strchr(eq + 1, ':');
  n = colon != NULL ? (size_t)(colon - eq - 1) : strlen(eq + 1);
  if (n == 0 || n >= RRPC_SMC_NAME_LEN) return -EINVAL;
  memcpy(e->ibdev, eq + 1, n);
  if (colon != NULL) {
    char *end;
    port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || end == colon + 1 || port < 1 || port > 255) return -EINVAL;
  }
  e->port = (uint8_t)port;
  return 0;
}

int rrpc__smc_parse_pnet(const char *spec, struct rrpc__smc_config *cfg, const char **why) {
  struct rrpc__smc_pnet_entry pnet[RRPC_SMC_MAX_PNET];
  char item[2 * RRPC_SMC_NAME_LEN + 8];
  size_t count = 0, i;
  const char *s = spec != NULL ? spec : "";
  while (*s != '\0') {
    if (count == RRPC_SMC_MAX_PNET) { *why = "more than 8 pnet entries"; return -EINVAL; }
    if (next_item(&s, item, sizeof(item)) != 0 || parse_pnet_entry(item, &pnet[count]) != 0) {
      *why = "a pnet entry is NETDEV=IBDEV or NETDEV=IBDEV:PORT (port 1..255)";
      return -EINVAL;
    }
    for (i = 0; i < count; i++)
      if (strcmp(pnet[i].netdev, pnet[count].netdev) == 0) { *why = "a netdev is listed twice"; return -EINVAL; }
    count++;
  }
  memcpy(cfg->pnet, pnet, count * sizeof(pnet[0]));
  cfg->pnet_count = (uint8_t)count;
  return 0;
}

int rrpc__smc_ueid_match(const struct rrpc__smc_config *cfg,
                         const uint8_t (*peer)[RRPC_SMC_EID_LEN], size_t peer_count,
                         uint8_t out[RRPC_SMC_EID_LEN]) {
  size_t i, j;
  for (i = 0; i < cfg->ueid_count; i++)
    for (j = 0; j < peer_count; j++)
      if (memcmp(cfg->ueids[i], peer[j], RRPC_SMC_EID_LEN) == 0) {
        memcpy(out, cfg->ueids[i], RRPC_SMC_EID_LEN);
        return 0;
      }
  return -ENOENT;
}

const struct rrpc__smc_pnet_entry *rrpc__smc_pnet_lookup(const struct rrpc__smc_config *cfg,
                                                         const char *netdev) {
  size_t i;
  for (i = 0; i < cfg->pnet_count; i++)
    if (strcmp(cfg->pnet[i].netdev, netdev) == 0) return &cfg->pnet[i];
  return NULL;
}

/* ---- the process-wide copy ----------------------------------------------- */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rrpc__smc_config g_cfg;

void rrpc__smc_config_get(struct rrpc__smc_config *out) {
  pthread_mutex_lock(&g_lock);
  memcpy(out, &g_cfg, sizeof(*out));
  pthread_mutex_unlock(&g_lock);
}

typedef int (*parse_fn)(const char *, struct rrpc__smc_config *, const char **);

static int set_part(parse_fn parse, const char *text, const char **why) {
  const char *ignored;
  int rc;
  pthread_mutex_lock(&g_lock);
  rc = parse(text, &g_cfg, why != NULL ? why : &ignored);
  pthread_mutex_unlock(&g_lock);
  return rc;
}

int rrpc_smc_set_ueids(const char *csv, const char **why) {
  return set_part(rrpc__smc_parse_ueids, csv, why);
}

int rrpc_smc_set_pnet(const char *spec, const char **why) {
  return set_part(rrpc__smc_parse_pnet, spec, why);
}
