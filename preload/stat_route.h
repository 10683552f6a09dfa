/* preload/stat_route.h - which page a request to the preload's stat port
 * (RRPC_RUN_STAT_PORT) asks for. The request is whatever one recv() got
 * from a local client: any bytes, NULs included, maybe cut short. Pure over
 * the bytes: the unit test and the preload_input fuzzer drive it. */
#ifndef RRPC_PRELOAD_STAT_ROUTE_H
#define RRPC_PRELOAD_STAT_ROUTE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rrpc_run_stat_page {
  RRPC_RUN_STAT_NOT_FOUND = 0, /* answered 404 with the list of pages */
  RRPC_RUN_STAT_CONNECTIONS,
  RRPC_RUN_STAT_VARS,
} rrpc_run_stat_page;

/* rrpc_run_stat_route - `req` (`n` bytes) names /connections or /vars when
 * it begins "GET " then the path, and the path ends there: at the end of
 * the bytes, a space, '?', '\r' or '\n' ("GET /varsx" is not /vars).
 * Everything else, the empty request included, is NOT_FOUND. */
rrpc_run_stat_page rrpc_run_stat_route(const char *req, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* RRPC_PRELOAD_STAT_ROUTE_H */
