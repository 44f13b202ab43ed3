/*
 * reduce.h - the reduce kernels (reduce.c). Pure.
 */
#ifndef SR_REDUCE_H
#define SR_REDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "silvic_ring.h"

/*
 * dst[i] = op(a[i], b[i]) for count elements.  Buffers are aligned to the
 * element size; a or b may be dst, and otherwise none overlaps another.
 */
void sr_reduce(void *dst, const void *a, const void *b, size_t count,
    enum sr_dtype dtype, enum sr_op op);

#endif
