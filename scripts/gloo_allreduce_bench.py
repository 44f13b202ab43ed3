#!/usr/bin/python3
"""gloo_allreduce_bench.py - torch.distributed's gloo all_reduce of float64
(sum) on loopback, timed the way `silvic-ring bench` times its rows, for
scripts/compare-peers.

Starts WORLD processes (torch.multiprocessing) that meet at
tcp://127.0.0.1:PORT.  Per size: warm-up iterations, then timed ones each
after a barrier; a row's time is the mean over iterations of the slowest
rank's time.  Rank 0 prints one line per size: "SIZE TIME_US BUSBW_GBPS"
(busbw = size / time x 2(n-1)/n, GB = 1e9 bytes).

usage: gloo_allreduce_bench.py WORLD SIZES ITERS WARMUP SMALL_ITERS SMALL_WARMUP
       SIZES is a comma-separated list of byte counts; sizes below 64 KiB
       run SMALL_ITERS after SMALL_WARMUP.

Exits 3 with "gloo: unavailable ..." on stderr when torch cannot be
imported.
"""
import os
import socket
import sys
import time

SMALL_BELOW = 65536


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def row(torch, dist, size, iters, warmup, rank, world):
    count = size // 8
    tensor = (torch.arange(count, dtype=torch.float64) + rank) % 17 - 8
    for _ in range(warmup):
        dist.barrier()
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    times = torch.zeros(iters, dtype=torch.float64)
    for i in range(iters):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        times[i] = time.perf_counter() - t0
    # Every all_reduce above summed in place: the values grew, the time
    # did not depend on them.
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    seconds = float(times.mean())
    busbw = count * 8 / seconds / 1e9 * 2 * (world - 1) / world if seconds > 0 else 0.0
    if rank == 0:
        print("%d %.3f %.6f" % (count * 8, seconds * 1e6, busbw), flush=True)


def worker(rank, world, port, sizes, iters, warmup, small_iters, small_warmup):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=world)
    for size in sizes:
        if size < SMALL_BELOW:
            row(torch, dist, size, small_iters, small_warmup, rank, world)
        else:
            row(torch, dist, size, iters, warmup, rank, world)
    dist.barrier()
    dist.destroy_process_group()


def main(argv):
    if len(argv) != 7:
        sys.stderr.write("usage: gloo_allreduce_bench.py WORLD SIZES ITERS "
                         "WARMUP SMALL_ITERS SMALL_WARMUP\n")
        return 2
    try:
        import torch.multiprocessing as mp
    except ImportError as e:
        sys.stderr.write("gloo: unavailable (install python3-torch): %s\n" % e)
        return 3
    world = int(argv[1])
    sizes = [int(s) for s in argv[2].split(",") if s]
    iters, warmup, small_iters, small_warmup = (int(a) for a in argv[3:7])
    # Loopback only: gloo otherwise picks the interface the host name
    # resolves to.
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    mp.spawn(worker, nprocs=world, join=True,
             args=(world, free_port(), sizes, iters, warmup, small_iters,
                   small_warmup))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
