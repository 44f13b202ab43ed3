/*
 * fuzz.h - what the fuzz targets share: the libFuzzer entry point and an
 * invariant check that aborts loudly, so that libFuzzer (or the replay
 * driver, fuzz/replay.c) records the input that broke it.  Targets keep
 * no state between inputs.
 */
#ifndef SR_FUZZ_H
#define SR_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant: on failure names the file, line and condition, then
 * aborts (a crash both libFuzzer and the replay driver report). */
#define FUZZ_CHECK(cond)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: invariant failed: %s\n",       \
			    __FILE__, __LINE__, #cond);                        \
			abort();                                               \
		}                                                              \
	} while (0)

#endif
