// transport/smc/stream/config.c - what a stream takes from rrpc's SMC configuration
// (--smc_ueid, --smc_pnet; transport/smc/smc_config.h) when its caller leaves it open.
#include "transport/smc/stream/stream.h"

#include <errno.h>

// The caller's ibdev wins; without one, the --smc_pnet entry of its netdev names the RDMA
// device and port, as the kernel's pnet table pairs them.
int rrpc__ss_resolve(const struct rrpc_smc_stream_opts *o, struct rrpc_smc_stream_opts *r,
                     uint8_t *port) {
  *r = *o;
  *port = 1;
  if (o->ibdev != NULL) return 0;
  static struct rrpc__smc_config cfg; // single-threaded API; keeps r->ibdev valid after return
  rrpc__smc_config_get(&cfg);
  const struct rrpc__smc_pnet_entry *e = o->netdev ? rrpc__smc_pnet_lookup(&cfg, o->netdev) : NULL;
  if (e == NULL) return -ENODEV;
  r->ibdev = e->ibdev;
  *port = e->port;
  return 0;
}

// The caller's list wins; without one, the process's --smc_ueid UEIDs.
int rrpc__ss_ueids(const struct rrpc_smc_stream_opts *o, struct rrpc__smc_config *cfg) {
  const char *why = NULL;
  if (o->ueids != NULL) return rrpc__smc_parse_ueids(o->ueids, cfg, &why);
  rrpc__smc_config_get(cfg);
  return 0;
}
