/* rrpc/errors.h - error codes of the rrpc public API.
 *
 * Every fallible rrpc function returns 0 on success or a negative code:
 * either -RRPC_E... from the table below or -errno (e.g. -ENOMEM, -ECANCELED).
 * RPC-level codes keep brpc's numbers where the meaning is the same, so a
 * brpc peer and an rrpc peer agree on error_code values in RpcMeta.
 */
#ifndef RRPC_ERRORS_H
#define RRPC_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, text). Kept in one table so names and texts never drift. */
#define RRPC_ERRNO_MAP(X)                                                      \
  X(ENOSERVICE, 1001, "no such service")                                       \
  X(ENOMETHOD, 1002, "no such method")                                         \
  X(EREQUEST, 1003, "bad request")                                             \
  X(ERPCAUTH, 1004, "authentication failed")                                   \
  X(ERPCTIMEDOUT, 1008, "RPC timed out")                                       \
  X(EOVERCROWDED, 1011, "too many pending writes on the connection")           \
  X(EINTERNAL, 2001, "internal server error")                                  \
  X(ERESPONSE, 2002, "bad response")                                           \
  X(ELOGOFF, 2003, "server is stopping")                                       \
  X(ELIMIT, 2004, "server reached its concurrency limit")                      \
  X(ECLOSE, 2005, "connection closed")                                         \
  X(ERDMA, 3001, "RDMA verbs error")                                           \
  X(ERDMAMEM, 3002, "memory is not registered for RDMA")                       \
  X(EPARSE, 4001, "malformed message")                                         \
  X(ETOOBIG, 4002, "message larger than the maximum body size")                \
  X(ENORDMA, 4003, "RDMA support is not compiled in; rebuild with "           \
                   "'sh config_brpc.sh --with-rdma' or "                       \
                   "'bazel build --define=WITH_RDMA=true'")                    \
  X(ENODEV, 4004, "no usable RDMA device")                                     \
  X(EDECLINED, 4005, "RDMA handshake declined and fallback is disabled")       \
  X(EHANDSHAKE, 4006, "RDMA handshake failed")                                 \
  X(ENOTREADY, 4007, "object is not started")                                  \
  X(EPOOL, 4008, "registered memory pool exhausted")                         \
  X(EREMOTENOENT, 4101, "no such remote region on this connection")          \
  X(EREMOTEREVOKED, 4102, "remote region was revoked")                       \
  X(EREMOTERANGE, 4103, "remote access outside the region")                  \
  X(EREMOTERIGHTS, 4104, "remote access the region does not allow")          \
  X(EREMOTECONN, 4105, "remote token was issued for another connection")

enum rrpc_errno {
#define RRPC_X_ENUM(name, value, text) RRPC_##name = value,
  RRPC_ERRNO_MAP(RRPC_X_ENUM)
#undef RRPC_X_ENUM
};

/* rrpc_strerror - text for an rrpc code or an errno value.
 * Accepts the code with either sign (-1008 and 1008 give the same text).
 * Never returns NULL; thread-safe; the string is static. */
const char *rrpc_strerror(int code);

/* rrpc_err_name - "ERPCTIMEDOUT", "ECONNRESET", ... or "UNKNOWN".
 * Same sign rule and guarantees as rrpc_strerror. */
const char *rrpc_err_name(int code);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_ERRORS_H */
