/*
 * mpi_allreduce_bench.c - MPI_Allreduce of doubles (sum), timed the way
 * `silvic-ring bench` times its rows, for scripts/compare-peers: per size,
 * warm-up iterations, then timed ones each after a barrier; a row's time
 * is the mean over iterations of the slowest rank's time.  Rank 0 prints
 * one line per size: "SIZE TIME_US BUSBW_GBPS" (busbw = size / time x
 * 2(n-1)/n, GB = 1e9 bytes).
 *
 * usage: mpi_allreduce_bench SIZES ITERS WARMUP SMALL_ITERS SMALL_WARMUP
 *        SIZES is a comma-separated list of byte counts; sizes below 64 KiB
 *        run SMALL_ITERS after SMALL_WARMUP.
 *
 * Compiled by compare-peers with mpicc at run time; not part of the build.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMALL_BELOW 65536

static long
number(const char *text, const char *what)
{
	char *end;
	long v = strtol(text, &end, 10);

	if (end == text || *end != '\0' || v < 0) {
		fprintf(stderr, "mpi_allreduce_bench: %s '%s' is not a number\n",
		    what, text);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	return v;
}

static void
row(long size, long iters, long warmup, int rank, int world)
{
	size_t count = (size_t)size / sizeof(double);
	double *send = malloc(count * sizeof(double) + 1);
	double *recv = malloc(count * sizeof(double) + 1);
	double *t = malloc((size_t)iters * sizeof(double));
	double *slowest = malloc((size_t)iters * sizeof(double));
	double sum = 0, seconds, busbw;

	if (send == NULL || recv == NULL || t == NULL || slowest == NULL) {
		fprintf(stderr, "mpi_allreduce_bench: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (size_t i = 0; i < count; i++)
		send[i] = (double)((rank + i) % 17) - 8;
	for (long i = 0; i < warmup; i++) {
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Allreduce(send, recv, (int)count, MPI_DOUBLE, MPI_SUM,
		    MPI_COMM_WORLD);
	}
	for (long i = 0; i < iters; i++) {
		double t0;

		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		MPI_Allreduce(send, recv, (int)count, MPI_DOUBLE, MPI_SUM,
		    MPI_COMM_WORLD);
		t[i] = MPI_Wtime() - t0;
	}
	MPI_Allreduce(t, slowest, (int)iters, MPI_DOUBLE, MPI_MAX,
	    MPI_COMM_WORLD);
	for (long i = 0; i < iters; i++)
		sum += slowest[i];
	seconds = sum / (double)iters;
	busbw = seconds > 0 ? (double)(count * sizeof(double)) / seconds /
	    1e9 * 2 * (world - 1) / world : 0;
	if (rank == 0) {
		printf("%zu %.3f %.6f\n", count * sizeof(double), seconds * 1e6,
		    busbw);
		fflush(stdout);
	}
	free(send);
	free(recv);
	free(t);
	free(slowest);
}

int
main(int argc, char **argv)
{
	long iters, warmup, small_iters, small_warmup;
	int rank, world;
	char *sizes, *size, *save = NULL;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world);
	if (argc != 6) {
		if (rank == 0)
			fprintf(stderr, "usage: mpi_allreduce_bench SIZES ITERS "
			    "WARMUP SMALL_ITERS SMALL_WARMUP\n");
		MPI_Finalize();
		return 2;
	}
	iters = number(argv[2], "ITERS");
	warmup = number(argv[3], "WARMUP");
	small_iters = number(argv[4], "SMALL_ITERS");
	small_warmup = number(argv[5], "SMALL_WARMUP");
	if (iters < 1 || small_iters < 1) {
		if (rank == 0)
			fprintf(stderr, "mpi_allreduce_bench: ITERS must be "
			    "at least 1\n");
		MPI_Finalize();
		return 2;
	}
	if ((sizes = strdup(argv[1])) == NULL)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (size = strtok_r(sizes, ",", &save); size != NULL;
	    size = strtok_r(NULL, ",", &save)) {
		long bytes = number(size, "size");

		if (bytes < SMALL_BELOW)
			row(bytes, small_iters, small_warmup, rank, world);
		else
			row(bytes, iters, warmup, rank, world);
	}
	free(sizes);
	MPI_Finalize();
	return 0;
}
