/* remote/link.h - private: what the rpc layer calls to carry remote memory
 * on its connections (rrpc/remote.h's rrpc_remote_link, link.c).
 *
 * Every remote-memory message rides the connection's byte stream as a
 * frame of remote/tcp_frames.h (magic "RMEM"), between whole RPC messages:
 * the control messages (HELLO, ANNOUNCE, REVOKE, NOTIFY) on every
 * transport, the bytes themselves (WRITE, READ_REQ/RESP, DONE) where no
 * one-sided carriage exists. A channel's and a server's read loops hand
 * the front of their read buffer to rrpc__rmt_stream_cut before cutting an
 * RPC frame, so the two kinds of frame interleave freely. */
#ifndef RRPC_REMOTE_LINK_H
#define RRPC_REMOTE_LINK_H

#include "rrpc/iobuf.h"
#include "rrpc/internal/iobuf.h"
#include "rrpc/remote.h"
#include "rrpc/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* rrpc__rmt_stream_cut - if rbuf opens with a remote-memory frame, handle
 * every such frame at its front. Returns 0 (rbuf is empty or opens with
 * something else: cut that as usual), -EAGAIN (a frame is not whole yet:
 * wait for more bytes) or another negative code (a protocol error: fail the
 * connection). Loop thread (the socket's on_data). */
int rrpc__rmt_stream_cut(rrpc__socket *s, rrpc_iobuf *rbuf);

/* rrpc__rmt_stream_is_frame - 1 if rbuf opens with a remote-memory frame's
 * first byte (a cheap test before a fast path that cuts RPC frames only). */
static inline int rrpc__rmt_stream_is_frame(const rrpc_iobuf *rbuf) {
  return rrpc__iobuf_first_byte(rbuf) == 'R';
}

/* rrpc__rmt_next_cut - rrpc__rmt_stream_cut for the frames after a
 * delivery's first, where its rrpc__rmt_on_data already ran: the byte test
 * inline, the call only for a remote-memory frame. Same results. */
static inline int rrpc__rmt_next_cut(rrpc__socket *s, rrpc_iobuf *rbuf) {
  return rrpc__rmt_stream_is_frame(rbuf) ? rrpc__rmt_stream_cut(s, rbuf) : 0;
}

/* rrpc__rmt_on_data - a delivery on s (loop thread): a link without its
 * one-sided carriage yet looks for it here, where the transport's state
 * may be read. rrpc__rmt_stream_cut does it too. */
void rrpc__rmt_on_data(rrpc__socket *s);

/* rrpc__rmt_link_of - a handle to socket s's link (made on first use). 0
 * or -ENOMEM. Any thread; the caller holds a reference on s. */
int rrpc__rmt_link_of(rrpc__socket *s, rrpc_remote_link **out);

/* rrpc__rmt_link_socket - the connection a link belongs to (borrowed: the
 * caller's handle keeps it). For tests that reach below the link, e.g. a
 * rogue posting raw work requests on the connection's own QP. */
rrpc__socket *rrpc__rmt_link_socket(const rrpc_remote_link *l);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_REMOTE_LINK_H */
