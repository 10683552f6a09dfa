// rrpc/smc_stream.h - a blocking byte stream over one SMC-R connection with a Linux kernel
// AF_SMC peer, rrpc being either the client or the server (docs/kernel-smc.md). It runs on
// the caller's thread and every wait is bounded by opts.timeout_ms, so it is for programs'
// own threads, never a loop thread. Single-threaded: one stream at a time per process.
//
// SMC-Rv2 (RoCEv2 GIDs: the only kind rxe has). The link is one RC QP on the RDMA device. As
// client, one link group per connection (a first-contact Accept is required, and the close
// ends the group with DELETE_LINK); as server, a kernel client's later connections may reuse
// the link of an earlier one (rrpc_smc_stream_close's keep_link). Built only with RDMA
// (config_brpc.sh --with-rdma); without it every call answers -ENOSYS.
#ifndef RRPC_SMC_STREAM_H
#define RRPC_SMC_STREAM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rrpc_smc_stream rrpc_smc_stream;

struct rrpc_smc_stream_opts {
  const char *ibdev;  // RDMA device, e.g. "rxe0"; NULL: netdev's --smc_pnet entry (and port)
  int gid_index;      // its RoCEv2 IPv4-mapped GID (rxe: 1)
  const char *netdev; // the netdev whose MAC the CLC and LLC announce
  const char *ueids;  // comma-separated user EIDs offered / accepted; NULL: --smc_ueid's
  uint8_t ring_code;  // my RMB: 16 KiB << code
  int timeout_ms;     // every wait (CLC, LLC, data) is bounded by this
};

// Counters of what the link did (for the test's output).
struct rrpc_smc_stream_stats {
  uint32_t llc_rx[16];      // LLC requests received, by type
  uint32_t cdc_rx, cdc_tx;  // CDCs
  uint64_t bytes_tx, bytes_rx;
  uint32_t write_blocked;   // times the peer's RMB was full
  uint32_t kernel_qpn, my_qpn;
  int reused;               // server: this connection went on the link of an earlier one
};

// rrpc_smc_stream_connect - on a connected TCP socket whose SYN carried SMC's option and whose
// peer echoed it: v2 Proposal, the kernel's Accept, QP + RMB, Confirm, LLC CONFIRM_LINK.
// 0 and *out, or a negative errno; a kernel Decline gives -ECONNREFUSED with *decline set.
int rrpc_smc_stream_connect(int tcp_fd, const struct rrpc_smc_stream_opts *o, rrpc_smc_stream **out,
                         uint32_t *decline);

// rrpc_smc_stream_accept - the server half on an accepted TCP socket (the listener marked for
// option 254, the client's SYN carried it). With a link kept by rrpc_smc_stream_close and the
// same kernel client (system ID and GID): its Proposal, an Accept without first contact on
// that link (a new RMB and token; the client's CONFIRM_RKEY answered while its Confirm is
// awaited), the Confirm. Otherwise: the kernel client's v2 Proposal (SMC-Rv2, one of
// o->ueids, else a Decline with *declined set and -ECONNREFUSED), a first-contact Accept,
// the client's Confirm, QP to RTS, LLC CONFIRM_LINK request and its response. No ADD_LINK is
// offered: the kernel client waits for one (2 s) and goes on with the single link.
int rrpc_smc_stream_accept(int tcp_fd, const struct rrpc_smc_stream_opts *o, rrpc_smc_stream **out,
                        uint32_t *declined);

// rrpc_smc_stream_write - all len bytes into the peer's RMB (RDMA WRITE + CDC), 0 or negative;
// -EPIPE after rrpc_smc_stream_shutdown.
int rrpc_smc_stream_write(rrpc_smc_stream *s, const void *buf, size_t len);

// rrpc_smc_stream_shutdown - half close, as the kernel's shutdown(SHUT_WR): one CDC with "peer
// done writing" after everything written (every later CDC keeps the flag). The kernel peer
// reads EOF once it has read the data and may go on writing: rrpc_smc_stream_read still
// works until the peer's own close. 0 (again 0 when already shut down), or -ECONNRESET /
// -ETIMEDOUT (no room to send within opts.timeout_ms): nothing was sent then.
int rrpc_smc_stream_shutdown(rrpc_smc_stream *s);

// rrpc_smc_stream_read - 1..len bytes; 0 at the peer's orderly close; -ECONNRESET at its abnormal
// close or the link's loss; -ETIMEDOUT.
long rrpc_smc_stream_read(rrpc_smc_stream *s, void *buf, size_t len);

// rrpc_smc_stream_close - the close CDC, the peer's close CDC (bounded wait), the peer's
// DELETE_RKEY (bounded wait: the kernel freed its side), DELETE_LINK, then every verbs object
// freed. 0 when the peer's close arrived, else negative; s is gone either way. *final (if not
// NULL) gets the connection's last counters. keep_link (server only): the link stays (no
// DELETE_LINK, the QP kept), and the same kernel client's next connection accepted goes on it
// (its Accept without first contact): the kernel reuses its link group.
int rrpc_smc_stream_close(rrpc_smc_stream *s, struct rrpc_smc_stream_stats *final, int keep_link);

// rrpc_smc_stream_end_parked - ends a link kept by keep_link (DELETE_LINK, verbs freed).
void rrpc_smc_stream_end_parked(void);

// rrpc_smc_stream_await_test_link - keeps the idle link served (LLC answered) until `count`
// TEST_LINKs of the peer arrived or max_ms passed; the TEST_LINKs answered so far. The kernel
// sends the next one only after it accepted the answer to the last (else it takes the link
// down), so count >= 2 checks the answers.
unsigned rrpc_smc_stream_await_test_link(rrpc_smc_stream *s, unsigned count, int max_ms);

// The counters so far.
const struct rrpc_smc_stream_stats *rrpc_smc_stream_counters(const rrpc_smc_stream *s);

#ifdef __cplusplus
}
#endif
#endif
