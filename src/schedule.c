/*
 * schedule.c - the ring allreduce's chunk schedule.  Pure arithmetic.
 *
 * count elements are cut into `world` blocks, the first count % world one
 * element longer.  Rank r starts the reduce-scatter by sending block r;
 * after world-1 steps it holds block r+1 folded over every rank.  For a
 * world of 4 (B = block, the digits the ranks folded into it):
 *
 *   step   rank 0        rank 1        rank 2        rank 3
 *   rs 0   send B0       send B1       send B2       send B3
 *          recv B3:3     recv B0:0     recv B1:1     recv B2:2
 *   rs 1   send B3:30    send B0:01    send B1:12    send B2:23
 *   rs 2   send B2:230   send B3:301   send B0:012   send B1:123
 *   done   B1:1230       B2:2301       B3:3012       B0:0123
 *   ag k   sends the block received at step k-1 (B1, B2, B3, B0 first)
 *
 * Block b is folded starting at rank b and going round the ring, on every
 * rank and every run: the fold order that makes results bitwise identical.
 */
#include "schedule.h"

size_t
sr_block_offset(size_t count, uint32_t world, uint32_t block)
{
	size_t base = count / world, extra = count % world;

	return (size_t)block * base + (block < extra ? block : extra);
}

size_t
sr_block_count(size_t count, uint32_t world, uint32_t block)
{
	return count / world + (block < count % world ? 1 : 0);
}

static uint32_t
ring_mod(int64_t value, uint32_t world)
{
	int64_t m = value % (int64_t)world;

	return (uint32_t)(m < 0 ? m + world : m);
}

uint32_t
sr_sched_rs_send(uint32_t rank, uint32_t world, uint32_t step)
{
	return ring_mod((int64_t)rank - step, world);
}

uint32_t
sr_sched_rs_recv(uint32_t rank, uint32_t world, uint32_t step)
{
	return ring_mod((int64_t)rank - step - 1, world);
}

uint32_t
sr_sched_ag_send(uint32_t rank, uint32_t world, uint32_t step)
{
	return ring_mod((int64_t)rank + 1 - step, world);
}

uint32_t
sr_sched_ag_recv(uint32_t rank, uint32_t world, uint32_t step)
{
	return ring_mod((int64_t)rank - step, world);
}
