/* preload/env_num.h - rrpc-run's numeric environment settings
 * (RRPC_RUN_RING_KB, RRPC_RUN_MAX_HANDSHAKES, RRPC_RUN_DECIDE_MS,
 * RRPC_RUN_ACCEPT_WAIT_MS, RRPC_RUN_EXIT_LINGER_MS, RRPC_RUN_STAT_PORT).
 *
 * A value is plain decimal digits: no sign, no spaces, no base prefix, no
 * trailing bytes. Anything else is refused, never clamped, so a typo
 * ("50ms", "1e3", " 7") is said on stderr by the caller instead of being
 * read as some other number. Pure over the string: the unit test and the
 * preload_input fuzzer drive it. */
#ifndef RRPC_PRELOAD_ENV_NUM_H
#define RRPC_PRELOAD_ENV_NUM_H

#ifdef __cplusplus
extern "C" {
#endif

/* rrpc_run_env_num - parse `v` (the variable's value, NULL if unset) as an
 * integer in lo..hi (0 <= lo <= hi). 1: unset or empty (*out untouched: the
 * caller keeps its default); 0: *out set; -EINVAL: not plain digits;
 * -ERANGE: digits, but outside lo..hi (however many digits: no overflow).
 * *out is untouched on every error. */
int rrpc_run_env_num(const char *v, long lo, long hi, long *out);

#ifdef __cplusplus
}
#endif

#endif /* RRPC_PRELOAD_ENV_NUM_H */
