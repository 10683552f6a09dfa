/* transport/smc/smc_config.h - what a kernel SMC-R peer requires of rrpc's
 * configuration before CLC v2 can succeed (docs/kernel-smc.md): the user EIDs
 * (UEIDs) rrpc offers in a v2 Proposal and matches in a peer's (a 6.1 kernel
 * on a RoCEv2-only device speaks SMC-Rv2 only, and only with a UEID in
 * common), and the pnet table that pairs a netdev with the RDMA device and
 * port that serves its connections (the kernel's pnet table; rrpc's
 * --rdma_device/--rdma_port choose otherwise).
 *
 * Parsing and matching are pure. The process-wide copy (set by
 * rrpc_smc_set_ueids / rrpc_smc_set_pnet in rrpc/rdma.h, or the --smc_ueid
 * and --smc_pnet flags) is guarded by a mutex; readers get a copy. */
#ifndef RRPC_TRANSPORT_SMC_SMC_CONFIG_H
#define RRPC_TRANSPORT_SMC_SMC_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  RRPC_SMC_MAX_UEIDS = 4,     /* the kernel's table size (SMC_MAX_UEID) */
  RRPC_SMC_EID_LEN = 32,      /* blank padded on the wire */
  RRPC_SMC_MAX_PNET = 8,      /* pnet entries rrpc keeps */
  RRPC_SMC_NAME_LEN = 64,     /* netdev / RDMA device names, NUL included */
};

struct rrpc__smc_pnet_entry {
  char netdev[RRPC_SMC_NAME_LEN];
  char ibdev[RRPC_SMC_NAME_LEN];
  uint8_t port; /* 1-based */
};

struct rrpc__smc_config {
  uint8_t ueid_count;
  uint8_t ueids[RRPC_SMC_MAX_UEIDS][RRPC_SMC_EID_LEN]; /* blank padded */
  uint8_t pnet_count;
  struct rrpc__smc_pnet_entry pnet[RRPC_SMC_MAX_PNET];
};

/* rrpc__smc_ueid_pad - check one EID as the kernel does (1..32 characters;
 * upper-case letters and digits, then also '.' and '-'; trailing blanks
 * ignored) and write it blank padded. 0 or -EINVAL. */
int rrpc__smc_ueid_pad(const char *eid, uint8_t out[RRPC_SMC_EID_LEN]);

/* rrpc__smc_parse_ueids - "EID[,EID...]" (at most 4, no duplicates; "" = none)
 * into cfg's UEIDs. rrpc__smc_parse_pnet - "NETDEV=IBDEV[:PORT][,...]" (port
 * 1 when left out, 1..255; at most 8; a netdev once) into cfg's pnet table.
 * Both: 0, or -EINVAL with *why set to a static text; cfg is changed on
 * success only. */
int rrpc__smc_parse_ueids(const char *csv, struct rrpc__smc_config *cfg, const char **why);
int rrpc__smc_parse_pnet(const char *spec, struct rrpc__smc_config *cfg, const char **why);

/* rrpc__smc_ueid_match - the EID a server negotiates: the first of its own
 * UEIDs (in configured order) that the peer's list holds, copied to out.
 * 0, or -ENOENT (the server then declines with RRPC_CLC_DECL_NOUEID). */
int rrpc__smc_ueid_match(const struct rrpc__smc_config *cfg,
                         const uint8_t (*peer)[RRPC_SMC_EID_LEN], size_t peer_count,
                         uint8_t out[RRPC_SMC_EID_LEN]);

/* rrpc__smc_pnet_lookup - the RDMA device and port configured for netdev:
 * a pointer into cfg, or NULL when none is. */
const struct rrpc__smc_pnet_entry *rrpc__smc_pnet_lookup(const struct rrpc__smc_config *cfg,
                                                         const char *netdev);

/* The process-wide configuration: a copy of it. */
void rrpc__smc_config_get(struct rrpc__smc_config *out);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_SMC_SMC_CONFIG_H */
