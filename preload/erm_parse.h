/* preload/erm_parse.h - the bytes of ERM's socket API (rrpc/erm.h) that a
 * program hands the preload: the SMC_ERM_CMD option's value and sendmsg's
 * control messages, and the completions written into recvmsg's.
 *
 * Pure functions over bytes, no state: erm.c calls them, the unit checks
 * in test/preload/erm_copy.c exercise them through the socket calls, and
 * test/fuzz/preload_erm_fuzzer.c drives them directly. */
#ifndef RRPC_PRELOAD_ERM_PARSE_H
#define RRPC_PRELOAD_ERM_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "rrpc/erm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* rrpc_run_erm_mr_parse - check an SMC_ERM_CMD option value of `len`
 * bytes. 0 with *out a copy; -EFAULT (val NULL); -EINVAL: len is not
 * sizeof(struct smc_erm_mr), an unknown cmd, reserved not 0; REG_MR with
 * access bits outside SMC_ERM_ACCESS_*, addr 0, len 0 or a range that wraps
 * the address space; DEREG_MR with memid 0. */
int rrpc_run_erm_mr_parse(const void *val, size_t len, struct smc_erm_mr *out);

/* rrpc_run_erm_copies_parse - walk `controllen` bytes of sendmsg control
 * messages. Returns the number of SMC_ERM_CMD_COPY messages, copied into
 * out[0..max) (0: there is none: the sendmsg is not ERM's), or -EINVAL: a
 * header that is short or runs past the buffer, a SOL_SMC message of
 * another type or with a length other than CMSG_LEN(sizeof(struct
 * smc_erm_copy)), a COPY with unknown flags, more than `max` COPYs, or a
 * COPY next to a message of another level (the relayed byte stream carries
 * none). The buffer need not be aligned. */
int rrpc_run_erm_copies_parse(const void *control, size_t controllen, struct smc_erm_copy *out, int max);

/* rrpc_run_erm_compl_put - write completions c[0..n) as SMC_ERM_CMD_COMPL
 * control messages into `control` (`cap` bytes, need not be aligned): as
 * many as fit whole. Returns how many; *used gets the bytes written (what
 * msg_controllen becomes). */
size_t rrpc_run_erm_compl_put(void *control, size_t cap, const struct smc_erm_compl *c, size_t n, size_t *used);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_PRELOAD_ERM_PARSE_H */
