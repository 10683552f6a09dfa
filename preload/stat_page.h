/* preload/stat_page.h - what rrpc_stat reads from a preloaded process.
 *
 * rrpc_stat reaches an rrpc process by HTTP on its port (GET /connections,
 * /vars). A program under rrpc-run has no rrpc server, so with
 * RRPC_RUN_STAT_PORT=N the preload answers those two pages itself on
 * 127.0.0.1:N, from the relay's loop: `rrpc_stat 127.0.0.1:N connections`
 * lists the process's relayed connections (transport, bytes, fallback
 * reason), `rrpc_stat 127.0.0.1:N vars` its counters. */
#ifndef RRPC_PRELOAD_STAT_PAGE_H
#define RRPC_PRELOAD_STAT_PAGE_H

/* Start the page if RRPC_RUN_STAT_PORT is set; a bind failure is said on
 * stderr and leaves the process without it. */
void rrpc_run_stat_page_start(void);

#endif /* RRPC_PRELOAD_STAT_PAGE_H */
