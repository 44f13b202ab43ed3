/*
 * check.h - the C tests' harness: TAP output ("ok N - name", "not ok N -
 * name") that scripts/run-tests counts.  CHECK records a failure with its
 * file and line and goes on; a test is one call of TEST_RUN.
 */
#ifndef SR_CHECK_H
#define SR_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_failures_in_test;
static int check_tests_run;
static int check_tests_failed;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			check_failures_in_test++;                              \
			printf("# %s:%d: check failed: %s\n", __FILE__,        \
			    __LINE__, #cond);                                  \
		}                                                              \
	} while (0)

#define CHECKF(cond, ...)                                                      \
	do {                                                                   \
		if (!(cond)) {                                                 \
			check_failures_in_test++;                              \
			printf("# %s:%d: check failed: %s: ", __FILE__,        \
			    __LINE__, #cond);                                  \
			printf(__VA_ARGS__);                                   \
			printf("\n");                                          \
		}                                                              \
	} while (0)

#define TEST_RUN(fn)                                                           \
	do {                                                                   \
		check_failures_in_test = 0;                                    \
		fflush(stdout);                                                \
		fn();                                                          \
		check_tests_run++;                                             \
		if (check_failures_in_test) {                                  \
			check_tests_failed++;                                  \
			printf("not ok %d - %s\n", check_tests_run, #fn);      \
		} else {                                                       \
			printf("ok %d - %s\n", check_tests_run, #fn);          \
		}                                                              \
		fflush(stdout);                                                \
	} while (0)

#define TEST_DONE()                                                            \
	(printf("1..%d\n", check_tests_run), check_tests_failed ? 1 : 0)

#endif
