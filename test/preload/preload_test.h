/* test/preload/preload_test.h - checks for the rrpc-run test programs
 * (plain C: the programs know nothing of rrpc; rrpc-run runs them). */
#ifndef RRPC_TEST_PRELOAD_TEST_H
#define RRPC_TEST_PRELOAD_TEST_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                       \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      fprintf(stderr, "%s:%d: CHECK(%s) failed (errno %d: %s)\n", __FILE__, __LINE__, #cond, \
              errno, strerror(errno));                                                    \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

#endif /* RRPC_TEST_PRELOAD_TEST_H */
