/* internal/dassert.h - private to rrpc: asserts for the hot paths' own
 * invariants (a ref's length, an index inside its array), which cost
 * instructions on every call in a release build.
 *
 * RRPC__DASSERT(x) checks x like assert() in the sanitizer builds (make
 * SAN=1, make TSAN=1, the fuzzers), where the test suites run with it, and
 * in any build compiled with -DRRPC_DEBUG_ASSERTS; elsewhere it compiles
 * to nothing (x is not evaluated, but still type-checked). Never use it
 * for a check of bytes a peer sent or of a caller's argument: those must
 * return an error in every build. */
#ifndef RRPC_INTERNAL_DASSERT_H
#define RRPC_INTERNAL_DASSERT_H

#include <assert.h>

#if defined(RRPC_DEBUG_ASSERTS) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RRPC__DASSERT_ON 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RRPC__DASSERT_ON 1
#endif
#endif

#ifdef RRPC__DASSERT_ON
#define RRPC__DASSERT(x) assert(x)
#else
#define RRPC__DASSERT(x) ((void)sizeof(!(x)))
#endif

#endif /* RRPC_INTERNAL_DASSERT_H */
