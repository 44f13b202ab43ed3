/*
 * common.c - what every command shares: signals, messages on stderr, the
 * exit status of a core error, JSON output and number parsing.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

volatile int cli_interrupted;
int cli_verbosity;
int64_t cli_rank = -1;
int64_t cli_progress_ms;
struct cli_preflight *cli_preflight;

static void
on_signal(int sig)
{
	cli_interrupted = sig;
}

void
cli_signals_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: a blocking poll must return EINTR so the core sees
	 * the cancel flag at once. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int
cli_exit_pipe(void)
{
	signal(SIGPIPE, SIG_DFL);
	raise(SIGPIPE);
	return EXIT_PIPE;
}

static void
vmessage(const char *kind, const char *fmt, va_list ap)
{
	char line[2048];
	int n = 0;

	if (cli_rank >= 0)
		n = snprintf(line, sizeof(line), "rank %lld: ", (long long)cli_rank);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	fprintf(stderr, "silvic-ring: %s%s\n", kind, line);
	fflush(stderr);
}

void
cli_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage("", fmt, ap);
	va_end(ap);
}

void
cli_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage("warning: ", fmt, ap);
	va_end(ap);
}

void
cli_status(const char *fmt, ...)
{
	va_list ap;

	if (cli_verbosity < 1)
		return;
	va_start(ap, fmt);
	vmessage("", fmt, ap);
	va_end(ap);
}

void
cli_debug(const char *fmt, ...)
{
	va_list ap;

	if (cli_verbosity < 2)
		return;
	va_start(ap, fmt);
	vmessage("debug: ", fmt, ap);
	va_end(ap);
}

void
cli_note_cpu(const struct sr_ring *ring)
{
	static int last = -1;
	int cpu;

	if (cli_verbosity < 2)
		return;	/* the kernel's mask is a system call */
	cpu = sr_ring_bound_cpu(ring);
	if (cpu == last)
		return;
	last = cpu;
	if (cpu >= 0)
		cli_debug("bound to CPU %d", cpu);
	else
		cli_debug("bound to no single CPU");
}

/* One item of a CPU list, "N" or "N-M", into [*lo, *hi]; 0 or -1. */
static int
cpu_range(const char *item, size_t len, unsigned *lo, unsigned *hi)
{
	char buf[24], *end;
	unsigned long a, b;

	if (len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, item, len);
	buf[len] = '\0';
	if (buf[0] < '0' || buf[0] > '9')
		return -1;
	a = strtoul(buf, &end, 10);
	b = a;
	if (*end == '-') {
		if (end[1] < '0' || end[1] > '9')
			return -1;
		b = strtoul(end + 1, &end, 10);
	}
	if (*end != '\0' || a > b || b >= CPU_SETSIZE)
		return -1;
	*lo = (unsigned)a;
	*hi = (unsigned)b;
	return 0;
}

/* Each CPU is listed once, so CLI_CPUS_MAX entries always hold them. */
_Static_assert(CLI_CPUS_MAX >= CPU_SETSIZE, "CLI_CPUS_MAX < CPU_SETSIZE");

int
cli_parse_cpus(const char *text, int *cpus, uint32_t *n, char *why,
    size_t size)
{
	cpu_set_t seen;

	*n = 0;
	if (strcmp(text, "none") == 0)
		return 0;
	CPU_ZERO(&seen);
	for (const char *p = text;; ) {
		size_t len = strcspn(p, ",");
		unsigned lo, hi;

		if (cpu_range(p, len, &lo, &hi) != 0) {
			snprintf(why, size, "'%.*s' is not a CPU number or "
			    "range (0-%d)", (int)len, p, CPU_SETSIZE - 1);
			return -1;
		}
		for (unsigned c = lo; c <= hi; c++) {
			if (CPU_ISSET(c, &seen)) {
				snprintf(why, size, "CPU %u is listed twice", c);
				return -1;
			}
			CPU_SET(c, &seen);
			cpus[(*n)++] = (int)c;
		}
		if (p[len] == '\0')
			return 0;
		p += len + 1;
	}
}

bool
cli_preflight_stop(const struct cli_ring *opts, bool csv, const char *script)
{
	struct cli_preflight *p = cli_preflight;

	if (p == NULL)
		return false;
	p->reached = true;
	p->json = opts->json;
	p->csv = csv;
	p->dry_run = opts->dry_run;
	p->script_stdin = script == NULL || strcmp(script, "/dev/stdin") == 0;
	p->port = opts->port;
	p->timeout = opts->timeout;
	return true;
}

bool
cli_progress_due(int64_t *next_at)
{
	int64_t now = sr_clock_ns(), every = cli_progress_ms * 1000000;

	if (cli_progress_ms <= 0)
		return false;
	if (*next_at == 0) {
		*next_at = now + every;
		return false;
	}
	if (now < *next_at)
		return false;
	while (*next_at <= now)
		*next_at += every;
	return true;
}

void
cli_progress(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage("", fmt, ap);
	va_end(ap);
}

int
cli_usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage("", fmt, ap);
	va_end(ap);
	fprintf(stderr, "try 'silvic-ring --help' for more information\n");
	return EXIT_USAGE;
}

int
cli_exit_for(const struct sr_error *err)
{
	switch (err->code) {
	case SR_EOK:
		return EXIT_OK;
	case SR_ECONFIG:
		return EXIT_USAGE;
	case SR_ENOMEM:
		return EXIT_INTERNAL;
	case SR_ECHECK:
		return EXIT_CHECK;
	case SR_EAUTH:
		return EXIT_AUTH;
	case SR_EINTERRUPTED:
		return EXIT_INTERRUPTED;
	default:
		break;
	}
	switch (err->phase) {
	case SR_PHASE_RENDEZVOUS:
		return EXIT_RENDEZVOUS;
	case SR_PHASE_BIND:
	case SR_PHASE_CONNECT:
	case SR_PHASE_ACCEPT:
	case SR_PHASE_HANDSHAKE:
		return EXIT_FORMATION;
	default:
		return EXIT_COLLECTIVE;
	}
}

int
cli_report(const struct sr_error *err, bool json)
{
	char line[SR_MESSAGE_MAX + 64];
	int64_t saved = cli_rank;

	sr_error_format(err, line, sizeof(line));
	/* The error's own rank prefix replaces the messages' one. */
	cli_rank = -1;
	cli_error("%s", line);
	cli_rank = saved;
	if (json) {
		fputs("{\"type\":\"error\",\"rank\":", stdout);
		if (err->rank >= 0)
			printf("%lld", (long long)err->rank);
		else
			fputs("null", stdout);
		fputs(",\"code\":", stdout);
		json_string(stdout, sr_code_name(err->code));
		fputs(",\"phase\":", stdout);
		json_string(stdout, sr_phase_name(err->phase));
		fputs(",\"peer\":", stdout);
		if (err->peer >= 0)
			printf("%lld", (long long)err->peer);
		else
			fputs("null", stdout);
		fputs(",\"peer_address\":", stdout);
		if (err->peer_address[0])
			json_string(stdout, err->peer_address);
		else
			fputs("null", stdout);
		fputs(",\"origin\":", stdout);
		if (err->origin >= 0)
			printf("%lld", (long long)err->origin);
		else
			fputs("null", stdout);
		fputs(",\"step\":", stdout);
		if (err->step >= 0)
			printf("%lld", (long long)err->step);
		else
			fputs("null", stdout);
		fputs(",\"message\":", stdout);
		json_string(stdout, line);
		printf(",\"exit\":%d}\n", cli_exit_for(err));
		fflush(stdout);
	}
	return cli_exit_for(err);
}

/* The length of the valid UTF-8 sequence at s, or 0. */
static int
utf8_length(const unsigned char *s)
{
	int n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 :
	    s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : 0;

	for (int i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if (n == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) ||
	    (s[0] == 0xed && s[1] >= 0xa0)))
		return 0;	/* overlong, or a surrogate */
	if (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) ||
	    (s[0] == 0xf4 && s[1] >= 0x90)))
		return 0;
	return n;
}

void
json_string(FILE *out, const char *s)
{
	putc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		/* Text from peers and files may be any bytes; JSON must be
		 * UTF-8: valid sequences pass, other bytes become U+FFFD. */
		if (c >= 0x80) {
			int n = utf8_length((const unsigned char *)s);

			if (n == 0) {
				fputs("\\ufffd", out);
				continue;
			}
			fwrite(s, 1, (size_t)n, out);
			s += n - 1;
			continue;
		}

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", out);
		else if (c == '\t')
			fputs("\\t", out);
		else if (c == '\r')
			fputs("\\r", out);
		else if (c < 0x20 || c == 0x7f)
			fprintf(out, "\\u%04x", c);
		else
			putc(c, out);
	}
	putc('"', out);
}

void
json_number(FILE *out, double v)
{
	if (!isfinite(v))
		fputs("null", out);
	else if (v == floor(v) && fabs(v) < 1e15)
		fprintf(out, "%.0f", v);
	else {
		/* The shortest of 15 or 17 digits that reads back as v:
		 * 0.173, not 0.17299999999999999. */
		char text[32];

		snprintf(text, sizeof(text), "%.15g", v);
		if (strtod(text, NULL) != v)
			snprintf(text, sizeof(text), "%.17g", v);
		fputs(text, out);
	}
}

static const char *
file_kind(mode_t mode)
{
	return S_ISFIFO(mode) ? "a FIFO (named pipe)" : S_ISDIR(mode) ?
	    "a directory" : S_ISCHR(mode) ? "a character device" :
	    S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" :
	    S_ISLNK(mode) ? "a symbolic link" : "not a regular file";
}

int
cli_open_regular(const char *path, bool nofollow, struct stat *st,
    char *why, size_t why_size)
{
	struct stat own;
	int fd, saved;

	if (st == NULL)
		st = &own;
	/* O_NONBLOCK: opening a FIFO for reading waits for a writer. */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY |
	    (nofollow ? O_NOFOLLOW : 0));
	if (fd < 0) {
		saved = errno;
		/* O_NOFOLLOW on a link is ELOOP; a socket cannot be opened
		 * (ENXIO): say what the path is. */
		if ((saved == ELOOP || saved == ENXIO) && lstat(path, st) == 0 &&
		    (S_ISLNK(st->st_mode) || S_ISSOCK(st->st_mode)))
			snprintf(why, why_size, "it is %s, not a regular file%s",
			    file_kind(st->st_mode), S_ISLNK(st->st_mode) ?
			    " (links are not followed here)" : "");
		else
			snprintf(why, why_size, "%s", strerror(saved));
		errno = saved;
		return -1;
	}
	if (fstat(fd, st) != 0) {
		saved = errno;
		snprintf(why, why_size, "%s", strerror(saved));
		close(fd);
		errno = saved;
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		snprintf(why, why_size, "it is %s, not a regular file",
		    file_kind(st->st_mode));
		close(fd);
		errno = EINVAL;
		return -1;
	}
	/* A regular file never blocks; later reads need no EAGAIN case. */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
		saved = errno;
		snprintf(why, why_size, "%s", strerror(saved));
		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

/* Lists, hostfiles and address files are small; a bigger file is not
 * one of ours. */
#define FILE_MAX (16u << 20)

char *
cli_read_file(const char *path, bool nofollow, struct stat *st, size_t *len,
    char *why, size_t why_size)
{
	int fd = cli_open_regular(path, nofollow, st, why, why_size);
	size_t cap = 4096, n = 0;
	char *buf = NULL, *grown;
	ssize_t got;

	if (fd < 0)
		return NULL;
	for (;;) {
		if (n + 1 >= cap || buf == NULL) {
			if (buf != NULL)
				cap *= 2;
			if (cap > FILE_MAX + 1) {
				free(buf);
				close(fd);
				snprintf(why, why_size, "larger than 16 MiB");
				errno = EFBIG;
				return NULL;
			}
			if ((grown = realloc(buf, cap)) == NULL) {
				free(buf);
				close(fd);
				snprintf(why, why_size, "out of memory");
				errno = ENOMEM;
				return NULL;
			}
			buf = grown;
		}
		got = read(fd, buf + n, cap - n - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int saved = errno;

			free(buf);
			close(fd);
			snprintf(why, why_size, "%s", strerror(saved));
			errno = saved;
			return NULL;
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	close(fd);
	buf[n] = '\0';
	*len = n;
	return buf;
}

size_t
cli_key_length(const uint8_t *key, size_t n)
{
	size_t body = n;

	if (body > 0 && key[body - 1] == '\n')
		body -= body > 1 && key[body - 2] == '\r' ? 2 : 1;
	for (size_t i = 0; i < body; i++)
		if ((key[i] < 0x20 && key[i] != '\t') || key[i] >= 0x7f)
			return n;
	return body;
}

int
cli_parse_size(const char *text, uint64_t *out)
{
	static const char units[] = "KMGT";
	char *end;
	unsigned long long v;
	const char *unit;
	int shift = 0;

	if (text[0] < '0' || text[0] > '9')
		return -1;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno != 0)
		return -1;
	if (*end != '\0') {
		unit = strchr(units, end[0] >= 'a' ? end[0] - 32 : end[0]);
		if (unit == NULL)
			return -1;
		shift = 10 * (int)(unit - units + 1);
		end++;
		if (strcmp(end, "") != 0 && strcmp(end, "B") != 0 &&
		    strcmp(end, "iB") != 0 && strcmp(end, "ib") != 0 &&
		    strcmp(end, "b") != 0)
			return -1;
	}
	if (shift > 0 && v > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

int
cli_parse_uint(const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (text[0] < '0' || text[0] > '9')
		return -1;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int
cli_parse_seconds(const char *text, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(text, &end);
	if (errno != 0 || end == text || *end != '\0' || !(v > 0) ||
	    v > 1e7)
		return -1;
	*out = v;
	return 0;
}

int
cli_nap(int ms, int64_t deadline_ns)
{
	int64_t left = (deadline_ns - sr_clock_ns()) / 1000000;

	if (left < ms)
		ms = left > 0 ? (int)left : 0;
	if (ms > 0)
		poll(NULL, 0, ms);
	return cli_interrupted ? -1 : 0;
}

/* The first executable regular file called name in PATH's directories
 * (an empty one is the current directory), absolute; NULL if none. */
static char *
path_search(const char *name)
{
	const char *path = getenv("PATH"), *dir, *end;
	char buf[PATH_MAX];
	struct stat st;

	if (path == NULL)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (dir = path;; dir = end + 1) {
		end = strchr(dir, ':');
		if (end == NULL)
			end = dir + strlen(dir);
		int n = snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(end - dir),
		    dir, end > dir ? "/" : "", name);

		if (n > 0 && (size_t)n < sizeof(buf) && stat(buf, &st) == 0 &&
		    S_ISREG(st.st_mode) && access(buf, X_OK) == 0)
			return realpath(buf, NULL);
		if (*end == '\0')
			break;
	}
	errno = ENOENT;
	return NULL;
}

char *
cli_self_path(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	const char *name = program_invocation_name;

	if (n > 0) {
		buf[n] = '\0';
		return strdup(buf);
	}
	if (name == NULL || name[0] == '\0') {
		errno = ENOENT;
		return NULL;
	}
	return strchr(name, '/') != NULL ? realpath(name, NULL) :
	    path_search(name);
}

void
cli_self_path_error(const char *purpose, const char *advice)
{
	cli_error("launch: cannot find this program's own path %s "
	    "(/proc/self/exe, or argv[0] '%s' on PATH): %s%s", purpose,
	    program_invocation_name, strerror(errno), advice);
}
