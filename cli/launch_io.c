/*
 * launch_io.c - a rank's output, line by line, for `silvic-ring launch`.
 *
 * Every line goes out in one writev, so lines of different ranks never
 * mix.  A plain line longer than LAUNCH_LINE_MAX goes out in tagged
 * pieces; a JSON record grows the buffer instead, as a record cut in two
 * is no record at all.  Machine output (LAUNCH_RAW) is one rank's only,
 * so it needs no lines: its bytes go out as they come.  Nothing here
 * blocks on the rank's pipe or looks at what a line says beyond its
 * first byte.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cli.h"
#include "launch_io.h"

void
launch_stream_init(struct launch_stream *s, int rank, int to,
    enum launch_mode mode)
{
	*s = (struct launch_stream){ .fd = -1, .to = to, .rank = rank,
	    .mode = mode };
}

void
launch_stream_drop(struct launch_stream *s)
{
	s->mode = LAUNCH_DROP;
	s->len = s->seen = 0;
	s->cut = false;
}

void
launch_stream_fini(struct launch_stream *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	free(s->buf);
	s->buf = NULL;
	s->cap = s->len = s->seen = 0;
}

/* Reported once; the rank learns of it from EPIPE on its next write. */
static int
fail(struct launch_stream *s, const char *why)
{
	cli_error("rank %d: %s; closing its %s", s->rank, why,
	    s->to == 1 ? "stdout" : "stderr");
	close(s->fd);
	s->fd = -1;
	s->len = s->seen = 0;
	return -1;
}

/* One line (or piece of one) and its newline, tagged unless a record. */
static int
emit(struct launch_stream *s, char *p, size_t n)
{
	char tag[24];
	struct iovec iov[3] = { { tag, 0 }, { p, n }, { (char *)"\n", 1 } };
	struct iovec *v = iov;
	int left = 3;
	ssize_t w;

	if (s->mode == LAUNCH_TAG && (s->cut || s->to != 1 || n == 0 ||
	    p[0] != '{'))
		iov[0].iov_len = (size_t)snprintf(tag, sizeof(tag), "[%d] ",
		    s->rank);
	while (left > 0) {
		if ((w = writev(s->to, v, left)) < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			s->broken = errno == EPIPE;
			return -1;
		}
		for (; left > 0 && (size_t)w >= v->iov_len; v++, left--)
			w -= (ssize_t)v->iov_len;
		if (left > 0) {
			v->iov_base = (char *)v->iov_base + w;
			v->iov_len -= (size_t)w;
		}
	}
	return 0;
}

/* Room for a record twice as long, up to LAUNCH_RECORD_MAX. */
static int
grow(struct launch_stream *s)
{
	char why[96], *grown;

	if (s->cap >= LAUNCH_RECORD_MAX) {
		snprintf(why, sizeof(why), "a JSON record longer than %u MiB, "
		    "the most the launcher passes on", LAUNCH_RECORD_MAX >> 20);
		return fail(s, why);
	}
	if ((grown = realloc(s->buf, s->cap * 2)) == NULL) {
		snprintf(why, sizeof(why), "out of memory for a JSON record "
		    "longer than %zu bytes", s->cap);
		return fail(s, why);
	}
	s->buf = grown;
	s->cap *= 2;
	return 0;
}

/* Writes out the complete lines and keeps the last, partial one at the
 * start of buf; a full buffer grows for a record, else goes out. */
static int
lines(struct launch_stream *s)
{
	char *p = s->buf, *nl;
	size_t left = s->len;
	int rc = 0;

	/* Only the first line can have been searched before: rescanning
	 * a growing record on every read would be quadratic. */
	while ((nl = memchr(p + s->seen, '\n', left - s->seen)) != NULL) {
		rc |= emit(s, p, (size_t)(nl - p));
		s->cut = false;
		s->seen = 0;
		left -= (size_t)(nl - p) + 1;
		p = nl + 1;
	}
	s->seen = left;
	if (left == s->cap && !s->cut && s->to == 1 && p[0] == '{')
		return rc | grow(s);
	if (left == s->cap) {
		rc |= emit(s, p, left);
		s->cut = true;
		left = s->seen = 0;
	}
	memmove(s->buf, p, left);
	s->len = left;
	return rc;
}

/* Back to LAUNCH_LINE_MAX once a long record is out, or to it at first;
 * afterwards len < cap, so a read always has room. */
static int
fit(struct launch_stream *s)
{
	char *fitted;

	if (s->cap == LAUNCH_LINE_MAX || s->len >= LAUNCH_LINE_MAX)
		return 0;
	if ((fitted = realloc(s->buf, LAUNCH_LINE_MAX)) == NULL)
		return s->buf != NULL ? 0 : fail(s, "out of memory");
	s->buf = fitted;
	s->cap = LAUNCH_LINE_MAX;
	return 0;
}

/* Machine output: what the rank wrote, as it wrote it (or nothing). */
static int
pass(struct launch_stream *s, size_t n)
{
	size_t off = 0;
	ssize_t w;

	while (s->mode == LAUNCH_RAW && off < n) {
		if ((w = write(s->to, s->buf + off, n - off)) < 0 &&
		    errno == EINTR)
			continue;
		if (w < 0) {
			s->broken = errno == EPIPE;
			return -1;
		}
		off += (size_t)w;
	}
	return 0;
}

int
launch_stream_read(struct launch_stream *s, int reads)
{
	int rc = 0;
	ssize_t n;

	while (s->fd >= 0 && reads-- > 0) {
		if (fit(s) != 0)
			return -1;
		n = read(s->fd, s->buf + s->len, s->cap - s->len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			break;
		if (n > 0 && (s->mode == LAUNCH_RAW || s->mode == LAUNCH_DROP)) {
			rc |= pass(s, (size_t)n);
			continue;
		}
		if (n <= 0) {
			if (s->len > 0)
				rc |= emit(s, s->buf, s->len);
			s->len = s->seen = 0;
			s->cut = false;
			close(s->fd);
			s->fd = -1;
			break;
		}
		s->len += (size_t)n;
		rc |= lines(s);
	}
	return rc;
}
