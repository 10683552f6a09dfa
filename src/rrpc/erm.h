/* rrpc/erm.h - SMC-ERM's socket API for unmodified programs under rrpc-run.
 *
 * SMC-ERM (a kernel proof of concept) drives remote memory through an SMC
 * socket: a program registers its memory with setsockopt(SOL_SMC,
 * SMC_ERM_CMD, ...) and gets a memid back; the registration is made known
 * to the peer; sendmsg with an SMC_ERM_CMD_COPY control message copies
 * bytes from one of this side's memids to one of the peer's; completions
 * come back as SMC_ERM_CMD_COMPL control messages from
 * recvmsg(..., MSG_ERRQUEUE). No kernel carries that API; rrpc-run's
 * preload does, on the TCP sockets it relays (docs/remote-memory.md, "ERM's
 * socket API"): a program written against this header and plain sockets
 * runs under tools/rrpc-run with no kernel patch. Without rrpc-run (or on a
 * connection rrpc-run left plain) the kernel answers the option with
 * ENOPROTOOPT, so a program can tell.
 *
 * This header needs nothing of rrpc: only <stdint.h>. The numeric values
 * below are ours (the POC's are not published); SOL_SMC is Linux's.
 */
#ifndef RRPC_ERM_H
#define RRPC_ERM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The socket option level: Linux's SOL_SMC. A TCP socket the kernel owns
 * refuses it with ENOPROTOOPT. */
#ifndef SOL_SMC
#define SOL_SMC 286
#endif

/* The option name at SOL_SMC ("ERM" in ASCII; Linux's SOL_SMC options are
 * small integers - SMC_LIMIT_HS is 1 - so none collides). */
#define SMC_ERM_CMD 0x45524d

/* Control message types at level SOL_SMC. */
#define SMC_ERM_CMD_COPY 0x45524d01  /* sendmsg: one struct smc_erm_copy */
#define SMC_ERM_CMD_COMPL 0x45524d02 /* recvmsg(MSG_ERRQUEUE): one struct smc_erm_compl */

/* smc_erm_mr.cmd */
#define SMC_ERM_REG_MR 1   /* register [addr, addr + len) */
#define SMC_ERM_DEREG_MR 2 /* deregister memid */

/* smc_erm_mr.access: what the peer may do with the region. 0: local only
 * (the source of this side's COPYs; the peer never learns of it). */
#define SMC_ERM_ACCESS_REMOTE_READ 1u
#define SMC_ERM_ACCESS_REMOTE_WRITE 2u

/* A memid with this bit set names a local-only region; one without it is
 * also the id the peer knows the region by. 0 is never a memid. */
#define SMC_ERM_MEMID_LOCAL 0x80000000u

/* The option's value, 32 bytes, for both commands:
 *   getsockopt(fd, SOL_SMC, SMC_ERM_CMD, &mr, &len) with len == sizeof mr:
 *     REG_MR writes the new memid into mr.memid (and len stays 32);
 *     DEREG_MR deregisters mr.memid.
 *   setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &mr, sizeof mr): the same; REG_MR
 *     writes the memid back into mr.memid too (as ERM's POC returns it),
 *     so the struct must be writable there.
 * Once REG_MR returned, a region with access bits is in the peer's table:
 * the peer may COPY to (or from) it as soon as it learns the memid (send
 * it in the byte stream). The memory must stay valid until DEREG_MR or the
 * socket's close. */
struct smc_erm_mr {
  uint32_t cmd;      /* SMC_ERM_REG_MR or SMC_ERM_DEREG_MR */
  uint32_t access;   /* REG_MR: SMC_ERM_ACCESS_* bits (no other bit) */
  uint64_t addr;     /* REG_MR: the memory (not 0) */
  uint64_t len;      /* REG_MR: bytes, >= 1 */
  uint32_t memid;    /* REG_MR: out; DEREG_MR: in */
  uint32_t reserved; /* must be 0 */
};

/* smc_erm_copy.flags */
#define SMC_ERM_REMOTE_COMPL 1u /* the owner of dst gets a completion once the bytes landed */

/* One COPY, 40 bytes: len bytes from this side's src_idx at src_offset
 * into the peer's dst_idx at dst_offset. A sendmsg may carry several (up to
 * RRPC_RUN_ERM_MAX_COPY_CMSGS, 64 by default) and no other control message;
 * its iov bytes, if any, go into the byte stream as a plain sendmsg's do.
 * The COPYs are checked and started before the bytes are sent; each one
 * completes once, in the order they were sent, with a completion of kind
 * SMC_ERM_COMPL_LOCAL. */
struct smc_erm_copy {
  uint32_t src_idx;    /* a memid of this side */
  uint32_t dst_idx;    /* a memid the peer registered with REMOTE_WRITE */
  uint64_t src_offset;
  uint64_t dst_offset;
  uint64_t len;        /* 0 allowed */
  uint32_t flags;      /* SMC_ERM_REMOTE_COMPL; no other bit */
  uint32_t tag;        /* given back in both completions */
};

/* smc_erm_compl.kind */
#define SMC_ERM_COMPL_LOCAL 1  /* one of this side's COPYs completed (status says how) */
#define SMC_ERM_COMPL_REMOTE 2 /* the peer's REMOTE_COMPL COPY landed in this side's memid */

/* One completion, 40 bytes. LOCAL: memid, offset, len are the COPY's dst
 * side (the peer's memid), seq counts this socket's COPYs from 1. REMOTE:
 * memid, offset, len are this side's region and span that was written,
 * status is 0, seq counts this socket's remote completions from 1. */
struct smc_erm_compl {
  uint32_t kind;   /* SMC_ERM_COMPL_LOCAL or SMC_ERM_COMPL_REMOTE */
  int32_t status;  /* 0, or a negative errno (the COPY failed; docs/remote-memory.md lists them) */
  uint32_t memid;
  uint32_t tag;    /* the COPY's tag */
  uint64_t offset;
  uint64_t len;
  uint64_t seq;
};

#ifdef __cplusplus
}
#endif
#endif /* RRPC_ERM_H */
