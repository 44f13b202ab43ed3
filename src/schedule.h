/*
 * schedule.h - which block goes where at each ring step (schedule.c). Pure.
 */
#ifndef SR_SCHEDULE_H
#define SR_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * count elements split into world blocks as evenly as possible: the first
 * count % world blocks hold one element more.
 */
size_t sr_block_offset(size_t count, uint32_t world, uint32_t block);
size_t sr_block_count(size_t count, uint32_t world, uint32_t block);
/*
 * Ring allreduce: at reduce-scatter step k (0 <= k < world-1) rank r sends
 * block (r - k) mod world and receives block (r - k - 1) mod world, which
 * it folds into its own; at allgather step k it sends block (r + 1 - k) and
 * receives block (r - k).  The block rank r owns reduced is (r + 1) mod
 * world.
 */
uint32_t sr_sched_rs_send(uint32_t rank, uint32_t world, uint32_t step);
uint32_t sr_sched_rs_recv(uint32_t rank, uint32_t world, uint32_t step);
uint32_t sr_sched_ag_send(uint32_t rank, uint32_t world, uint32_t step);
uint32_t sr_sched_ag_recv(uint32_t rank, uint32_t world, uint32_t step);

#endif
