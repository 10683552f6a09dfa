/* rrpc/rrpc.h - the whole public C API of rrpc in one include. (rrpc/erm.h
 * is not part of it: it is ERM's socket API for programs under rrpc-run,
 * which link nothing of rrpc.) */
#ifndef RRPC_RRPC_H
#define RRPC_RRPC_H

#include "rrpc/channel.h"
#include "rrpc/controller.h"
#include "rrpc/errors.h"
#include "rrpc/iobuf.h"
#include "rrpc/builtin.h"
#include "rrpc/limits.h"
#include "rrpc/log.h"
#include "rrpc/loops.h"
#include "rrpc/metrics.h"
#include "rrpc/naming.h"
#include "rrpc/rdma.h"
#include "rrpc/remote.h"
#include "rrpc/server.h"
#include "rrpc/version.h"

#endif /* RRPC_RRPC_H */
