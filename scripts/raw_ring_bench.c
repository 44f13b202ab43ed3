/*
 * raw_ring_bench.c - the ceilings for scripts/compare-peers: what TCP alone
 * costs to move a ring allreduce's bytes over loopback, and (--sum) what
 * the plainest ring allreduce over the same sockets costs.  Nothing is
 * framed or checked on the way.
 *
 * Forks WORLD ranks in a ring on 127.0.0.1, each connected to the next
 * (TCP_NODELAY).  An iteration is the 2(n-1) steps of a ring allreduce:
 * at step k rank r sends block r-k to rank r+1 and receives block r-k-1
 * from rank r-1, blocks cut as silvic-ring cuts them (size/n, the first
 * size % n one element longer; an element is a byte, or with --sum an
 * f64).  For a world of 3:
 *
 *   step   rank 0      rank 1      rank 2
 *   0      send B0     send B1     send B2     from the source buffer
 *          recv B2     recv B0     recv B1
 *   1      send B2     send B0     send B1     forwarding step 0's block
 *          recv B1     recv B2     recv B0
 *   2, 3   the same again (the allgather half)
 *
 * A step's send starts once the first bytes it forwards have arrived, as
 * in a pipelined ring; one loop sends and receives at once on nonblocking
 * sockets.  An allreduce over TCP must move at least these bytes through
 * these sockets in this order: its busbw can only be lower.  With nothing
 * folded, every block ends as its origin rank's bytes, which a checked
 * iteration per size verifies.
 *
 * --sum folds too, out of place as MPI_Allreduce(send, recv) does: in
 * the first n-1 steps each piece received goes straight into the output
 * buffer and the rank's own f64s are added there (d += x) as soon as
 * recv returns it, and a step forwards what is folded, so the fold cuts
 * through at the granularity of one recv.  The fold is the loop
 * `d[i] += x[i]` compiled with -O2; nothing else is done to the bytes.
 * An allreduce that frames and checks its data can get close to this,
 * not past it.  The checked iteration verifies every f64 is the sum of
 * the ranks' inputs (small integers, so the sum is exact in any order).
 *
 * Idle waits sched_yield for up to 50 us, then poll: on a 2-core machine
 * this beat plain poll (a wake-up per hop: 2x slower at 8 B with 4 ranks)
 * and a blocking sender thread beside a blocking receiver (4-5x slower at
 * 8 B, no faster at 256 MiB); pure spinning starves ranks sharing a core.
 *
 * Timed like mpi_allreduce_bench.c: per size, warm-up iterations, then
 * timed ones each after a barrier; a row's time is the mean over
 * iterations of the slowest rank's time.  Prints "SIZE TIME_US BUSBW_GBPS"
 * per size (busbw = size / time x 2(n-1)/n, GB = 1e9 bytes).  Every wait
 * gives up after 60 s, exiting 1.
 *
 * usage: raw_ring_bench [--sum] WORLD SIZES ITERS WARMUP SMALL_ITERS
 *                       SMALL_WARMUP [CONGESTION]
 *        SIZES is a comma-separated list of byte counts (with --sum,
 *        multiples of 8); sizes below 64 KiB run SMALL_ITERS after
 *        SMALL_WARMUP.  CONGESTION is the sockets' TCP congestion
 *        control (default: the kernel's), so that the ceiling runs the
 *        TCP silvic-ring's links run.  Bad arguments exit 2.
 *
 * Compiled by compare-peers (cc -O2 -pthread); not part of the build.
 */
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define SMALL_BELOW	65536
#define DEADLINE_S	60
#define YIELD_S		50e-6

/* Shared by all ranks: mapped before the fork. */
struct shared {
	unsigned	arrived, generation;	/* the barrier */
	double		times[];		/* [iteration][rank] */
};

struct rank {
	int		 rank, world;
	int		 next, prev;	/* the sockets to rank+1, from rank-1 */
	int		 to, from;	/* their ranks */
	char		*src, *dst;
	size_t		 size;
	size_t		 esz;		/* an element: 1, or 8 with --sum */
	int		 sum;		/* --sum: fold the first n-1 steps */
	struct shared	*shm;
};

static int me = -1;

/* One write, so that ranks failing together do not interleave. */
static void
die(const char *fmt, ...)
{
	char msg[512];
	int n;
	va_list ap;

	n = snprintf(msg, sizeof(msg), me >= 0 ? "raw_ring_bench: rank %d: " :
	    "raw_ring_bench: ", me);
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - n - 1, fmt, ap);
	va_end(ap);
	strcat(msg, "\n");
	fputs(msg, stderr);
	exit(1);
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long
number(const char *text, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(text, &end, 10);
	if (end == text || *end != '\0' || v < 0 || errno != 0) {
		fprintf(stderr, "raw_ring_bench: %s '%s' is not a number\n",
		    what, text);
		exit(2);
	}
	return v;
}

/* Where block b starts, in bytes: blocks are cut by elements. */
static size_t
block_off(const struct rank *r, int b)
{
	size_t n = r->size / r->esz, base = n / r->world, extra = n % r->world;

	return (b * base + ((size_t)b < extra ? (size_t)b : extra)) * r->esz;
}

static size_t
block_len(const struct rank *r, int b)
{
	size_t n = r->size / r->esz;

	return (n / r->world + ((size_t)b < n % r->world)) * r->esz;
}

/* The block rank r sends at step k; it receives block(r, k + 1). */
static int
block(const struct rank *r, int step)
{
	return ((r->rank - step) % r->world + r->world) % r->world;
}

/* The byte that rank `origin` puts at offset i of its source buffer. */
static unsigned char
pattern(int origin, size_t i)
{
	return (unsigned char)(origin * 37 + i * 7 + (i >> 8) * 11 + 1);
}

/* With --sum, the f64 rank `origin` puts at element i: a small integer. */
static double
value(int origin, size_t i)
{
	return (double)((origin * 37 + i * 7 + (i >> 8) * 11) % 1024);
}

/* d += x over n f64s: the whole of the reduction. */
static void
fold(double *restrict d, const double *restrict x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		d[i] += x[i];
}

static void
barrier(struct rank *r)
{
	struct shared *s = r->shm;
	unsigned gen = __atomic_load_n(&s->generation, __ATOMIC_ACQUIRE);
	double deadline = now() + DEADLINE_S;

	if (__atomic_add_fetch(&s->arrived, 1, __ATOMIC_ACQ_REL) ==
	    (unsigned)r->world) {
		__atomic_store_n(&s->arrived, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->generation, gen + 1, __ATOMIC_RELEASE);
		return;
	}
	while (__atomic_load_n(&s->generation, __ATOMIC_ACQUIRE) == gen) {
		if (now() > deadline)
			die("timed out after %ds in the barrier: %u of %d "
			    "ranks arrived", DEADLINE_S,
			    __atomic_load_n(&s->arrived, __ATOMIC_RELAXED),
			    r->world);
		sched_yield();
	}
}

static void
wait_fds(const struct rank *r, int out, int rstep, size_t roff)
{
	struct pollfd pfd[2] = {
		{ out ? r->next : -1, POLLOUT, 0 },
		{ rstep < 2 * (r->world - 1) ? r->prev : -1, POLLIN, 0 },
	};
	int n;

	while ((n = poll(pfd, 2, DEADLINE_S * 1000)) == -1 && errno == EINTR)
		;
	if (n == -1)
		die("poll: %s", strerror(errno));
	if (n == 0 && pfd[1].fd != -1)
		die("timed out after %ds waiting for rank %d: step %d, %zu of "
		    "%zu bytes received", DEADLINE_S, r->from, rstep, roff,
		    block_len(r, block(r, rstep + 1)));
	if (n == 0)
		die("timed out after %ds waiting for rank %d to take more "
		    "bytes", DEADLINE_S, r->to);
}

/*
 * One iteration: send step ss at offset so, receive step rs at ro, of
 * which the first fo bytes may go on (with --sum, those folded).
 */
static void
exchange(struct rank *r)
{
	int steps = 2 * (r->world - 1), ss = 0, rs = 0;
	size_t so = 0, ro = 0, fo = 0;
	double idle = 0;

	while (ss < steps || rs < steps) {
		int moved = 0, out_full = 0;
		ssize_t n;

		if (ss < steps) {
			size_t len = block_len(r, block(r, ss));
			/* What has arrived of the block this step forwards */
			size_t can = ss == 0 || rs >= ss ? len :
			    rs == ss - 1 ? fo : 0;
			char *base = (ss == 0 ? r->src : r->dst) +
			    block_off(r, block(r, ss));

			if (can > so) {
				n = send(r->next, base + so, can - so,
				    MSG_DONTWAIT | MSG_NOSIGNAL);
				if (n > 0)
					so += n, moved = 1;
				else if (errno == EAGAIN || errno == EINTR)
					out_full = 1;
				else
					die("send to rank %d: %s", r->to,
					    strerror(errno));
			}
			if (so == len)
				ss++, so = 0, moved = 1;
		}
		if (rs < steps) {
			size_t off = block_off(r, block(r, rs + 1));
			size_t len = block_len(r, block(r, rs + 1));
			char *base = r->dst + off;

			if (len > ro) {
				n = recv(r->prev, base + ro, len - ro,
				    MSG_DONTWAIT);
				if (n > 0)
					ro += n, moved = 1;
				else if (n == 0)
					die("rank %d closed the connection at "
					    "step %d", r->from, rs);
				else if (errno != EAGAIN && errno != EINTR)
					die("recv from rank %d: %s", r->from,
					    strerror(errno));
			}
			if (!r->sum || rs >= r->world - 1) {
				fo = ro;
			} else if (ro - ro % 8 > fo) {
				fold((double *)(base + fo), (const double *)
				    (r->src + off + fo), (ro - ro % 8 - fo) / 8);
				fo = ro - ro % 8;
			}
			if (ro == len)
				rs++, ro = 0, fo = 0, moved = 1;
		}
		if (moved) {
			idle = 0;
			continue;
		}
		if (idle == 0)
			idle = now();
		if (now() - idle < YIELD_S) {
			sched_yield();
			continue;
		}
		wait_fds(r, out_full, rs, ro);
		idle = 0;
	}
}

/* After an iteration every block holds its origin rank's bytes, or
 * with --sum every f64 the sum of the ranks' f64s there. */
static void
check(struct rank *r)
{
	if (r->sum) {
		const double *d = (const double *)r->dst;

		for (size_t i = 0; i < r->size / 8; i++) {
			double want = 0;

			for (int k = 0; k < r->world; k++)
				want += value(k, i);
			if (d[i] != want)
				die("size %zu: f64 %zu is %g, expected %g", r->size,
				    i, d[i], want);
		}
		return;
	}
	for (int b = 0; b < r->world; b++) {
		size_t off = block_off(r, b), end = off + block_len(r, b);

		for (size_t i = off; i < end; i++)
			if ((unsigned char)r->dst[i] != pattern(b, i))
				die("size %zu: byte %zu is 0x%02x, expected "
				    "0x%02x from rank %d", r->size, i,
				    (unsigned char)r->dst[i], pattern(b, i), b);
	}
}

static void
row(struct rank *r, size_t size, long iters, long warmup)
{
	double *t = r->shm->times, sum = 0;

	r->size = size;
	if (r->sum)
		for (size_t i = 0; i < size / 8; i++)
			((double *)r->src)[i] = value(r->rank, i);
	else
		for (size_t i = 0; i < size; i++)
			r->src[i] = (char)pattern(r->rank, i);
	memset(r->dst, 0, size);
	for (long i = -warmup - 1; i < iters; i++) {
		double t0;

		barrier(r);
		t0 = now();
		exchange(r);
		if (i >= 0)
			t[i * r->world + r->rank] = now() - t0;
		else if (i == -warmup - 1)
			check(r);
	}
	barrier(r);
	if (r->rank != 0)
		return;
	for (long i = 0; i < iters; i++) {
		double slowest = 0;

		for (int k = 0; k < r->world; k++)
			if (t[i * r->world + k] > slowest)
				slowest = t[i * r->world + k];
		sum += slowest;
	}
	sum /= iters;
	printf("%zu %.3f %.6f\n", size, sum * 1e6, sum > 0 ?
	    size / sum / 1e9 * 2 * (r->world - 1) / r->world : 0);
	fflush(stdout);
}

static void
loopback(struct sockaddr_in *sin, int port)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin->sin_port = htons(port);
}

static int
listen_open(int *port)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int fd;

	loopback(&sin, 0);
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		die("socket: %s", strerror(errno));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1)
		die("bind 127.0.0.1:0: %s", strerror(errno));
	if (listen(fd, 16) == -1)
		die("listen: %s", strerror(errno));
	if (getsockname(fd, (struct sockaddr *)&sin, &len) == -1)
		die("getsockname: %s", strerror(errno));
	*port = ntohs(sin.sin_port);
	return fd;
}

/* The sockets' congestion control, NULL for the kernel's. */
static const char *congestion;

/* The timeouts bound the blocking calls of ring_open. */
static void
tune(int fd)
{
	struct timeval tv = { DEADLINE_S, 0 };
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
		die("setsockopt: %s", strerror(errno));
	if (congestion != NULL && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION,
	    congestion, strlen(congestion)) != 0)
		die("TCP congestion control '%s': %s", congestion,
		    strerror(errno));
}

/*
 * The next rank's listener exists since before the fork, so connecting
 * never races it.  The previous rank says its rank in 4 bytes.
 */
static void
ring_open(struct rank *r, int listener, int next_port)
{
	struct sockaddr_in sin;
	struct pollfd pfd = { listener, POLLIN, 0 };
	uint32_t hello = htonl(r->rank), got;

	loopback(&sin, next_port);
	if ((r->next = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		die("socket: %s", strerror(errno));
	tune(r->next);
	if (connect(r->next, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    send(r->next, &hello, 4, MSG_NOSIGNAL) != 4)
		die("connect to rank %d (127.0.0.1:%d): %s", r->to, next_port,
		    strerror(errno));
	if (poll(&pfd, 1, DEADLINE_S * 1000) != 1)
		die("timed out after %ds waiting for rank %d to connect",
		    DEADLINE_S, r->from);
	if ((r->prev = accept(listener, NULL, NULL)) == -1)
		die("accept: %s", strerror(errno));
	tune(r->prev);
	if (recv(r->prev, &got, 4, MSG_WAITALL) != 4)
		die("no hello from rank %d", r->from);
	if (ntohl(got) != (uint32_t)r->from)
		die("accepted rank %u, expected rank %d", ntohl(got), r->from);
	close(listener);
}

/* Reaps the ranks; the first failure takes the others down. */
static int
reap(pid_t *pids, int world)
{
	int failed = 0, status, k;
	pid_t pid;

	for (int left = world; left > 0; left--) {
		if ((pid = wait(&status)) == -1)
			die("wait: %s", strerror(errno));
		for (k = 0; k < world && pids[k] != pid; k++)
			;
		if (k < world)
			pids[k] = 0;
		if ((WIFEXITED(status) && WEXITSTATUS(status) == 0) || failed)
			continue;
		if (WIFSIGNALED(status))
			fprintf(stderr, "raw_ring_bench: rank %d killed by "
			    "signal %d\n", k, WTERMSIG(status));
		for (int j = 0; j < world; j++)
			if (pids[j] > 0)
				kill(pids[j], SIGKILL);
		failed = 1;
	}
	return failed;
}

int
main(int argc, char **argv)
{
	static const char *names[] = { "WORLD", "ITERS", "WARMUP",
	    "SMALL_ITERS", "SMALL_WARMUP" };
	long arg[5], *sizes;
	size_t largest = 0, shm_len;
	struct rank r;
	int *listeners, *ports, world, nsizes = 0;
	pid_t *pids, parent = getpid();
	char *list, *size, *save = NULL;
	int sum = argc > 1 && strcmp(argv[1], "--sum") == 0;

	argc -= sum;
	argv += sum;
	if (argc != 7 && argc != 8) {
		fprintf(stderr, "usage: raw_ring_bench [--sum] WORLD SIZES "
		    "ITERS WARMUP SMALL_ITERS SMALL_WARMUP [CONGESTION]\n");
		return 2;
	}
	if (argc == 8)
		congestion = argv[7];
	for (int i = 0; i < 5; i++)
		arg[i] = number(argv[i == 0 ? 1 : i + 2], names[i]);
	if (arg[0] < 2 || arg[0] > 256) {
		fprintf(stderr, "raw_ring_bench: WORLD '%s' is not 2 to 256\n",
		    argv[1]);
		return 2;
	}
	if (arg[1] < 1 || arg[3] < 1) {
		fprintf(stderr, "raw_ring_bench: %s '%s' is below 1\n",
		    arg[1] < 1 ? "ITERS" : "SMALL_ITERS",
		    argv[arg[1] < 1 ? 3 : 5]);
		return 2;
	}
	world = arg[0];
	if ((list = strdup(argv[2])) == NULL ||
	    (sizes = calloc(strlen(list) + 1, sizeof(long))) == NULL)
		die("out of memory");
	for (size = strtok_r(list, ",", &save); size != NULL;
	    size = strtok_r(NULL, ",", &save)) {
		sizes[nsizes] = number(size, "size");
		if (sum && sizes[nsizes] % 8 != 0) {
			fprintf(stderr, "raw_ring_bench: size '%s' is not a "
			    "multiple of 8 (one f64)\n", size);
			return 2;
		}
		if ((size_t)sizes[nsizes] > largest)
			largest = sizes[nsizes];
		nsizes++;
	}

	memset(&r, 0, sizeof(r));
	r.world = world;
	r.sum = sum;
	r.esz = sum ? 8 : 1;
	shm_len = sizeof(*r.shm) + (arg[1] > arg[3] ? arg[1] : arg[3]) *
	    world * sizeof(double);
	r.shm = mmap(NULL, shm_len, PROT_READ | PROT_WRITE, MAP_SHARED |
	    MAP_ANONYMOUS, -1, 0);
	listeners = calloc(world, sizeof(int));
	ports = calloc(world, sizeof(int));
	pids = calloc(world, sizeof(pid_t));
	if (r.shm == MAP_FAILED || !listeners || !ports || !pids)
		die("out of memory for %zu bytes of shared memory", shm_len);
	for (int k = 0; k < world; k++)
		listeners[k] = listen_open(&ports[k]);
	fflush(NULL);
	for (int k = 0; k < world; k++) {
		if ((pids[k] = fork()) == -1)
			die("fork: %s", strerror(errno));
		if (pids[k] > 0)
			continue;
#ifdef __linux__
		/* Killing the parent (a timeout) takes the ranks along. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 &&
		    getppid() != parent)
			_exit(1);
#endif
		me = r.rank = k;
		r.to = (k + 1) % world;
		r.from = (k + world - 1) % world;
		for (int j = 0; j < world; j++)
			if (j != k)
				close(listeners[j]);
		ring_open(&r, listeners[k], ports[r.to]);
		if ((r.src = malloc(largest + 1)) == NULL ||
		    (r.dst = malloc(largest + 1)) == NULL)
			die("out of memory for 2 x %zu bytes", largest);
		for (int i = 0; i < nsizes; i++)
			row(&r, sizes[i], arg[sizes[i] < SMALL_BELOW ? 3 : 1],
			    arg[sizes[i] < SMALL_BELOW ? 4 : 2]);
		exit(0);
	}
	for (int k = 0; k < world; k++)
		close(listeners[k]);
	return reap(pids, world);
}
