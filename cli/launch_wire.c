/*
 * launch_wire.c - the orders a launcher sends each host's agent over ssh,
 * and the control lines on the agent's connection back (the formats are
 * drawn in launch_wire.h).  Every length and number that arrives is
 * checked before anything is kept; nothing here trusts its peer more
 * than a file.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launch_wire.h"
#include "rendezvous.h"

const char launch_orders_trailer[] = "\nend 0\n\n";

/* --------------------------------------------------------------- queue */

int
wire_out_add(struct wire_out *q, const void *data, size_t n)
{
	char *grown;
	size_t cap;

	if (n == 0)
		return 0;	/* nothing to copy, and maybe no buffer yet */
	if (q->off > 0 && q->off == q->len)
		q->off = q->len = 0;
	if (q->len + n > q->cap) {
		/* What was sent goes first: the queue holds only what is
		 * left. */
		if (q->off > 0) {
			memmove(q->buf, q->buf + q->off, q->len - q->off);
			q->len -= q->off;
			q->off = 0;
		}
		for (cap = q->cap ? q->cap : 256; cap < q->len + n; cap *= 2)
			;
		if (cap != q->cap) {
			if ((grown = realloc(q->buf, cap)) == NULL)
				return -1;
			q->buf = grown;
			q->cap = cap;
		}
	}
	memcpy(q->buf + q->len, data, n);
	q->len += n;
	return 0;
}

bool
wire_out_pending(const struct wire_out *q)
{
	return q->off < q->len;
}

int
wire_out_flush(struct wire_out *q, int fd)
{
	while (q->off < q->len) {
		ssize_t n = write(fd, q->buf + q->off, q->len - q->off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0)
			return -1;
		q->off += (size_t)n;
	}
	return 0;
}

void
wire_out_free(struct wire_out *q)
{
	free(q->buf);
	memset(q, 0, sizeof(*q));
}

/* -------------------------------------------------------------- orders */

static int
record(struct wire_out *q, const char *name, const void *value, size_t n)
{
	char head[64];
	int h = snprintf(head, sizeof(head), "%s %zu\n", name, n);

	return wire_out_add(q, head, (size_t)h) != 0 ||
	    wire_out_add(q, value, n) != 0 || wire_out_add(q, "\n", 1) != 0 ?
	    -1 : 0;
}

static int
recordf(struct wire_out *q, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
recordf(struct wire_out *q, const char *name, const char *fmt, ...)
{
	char value[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(value, sizeof(value), fmt, ap);
	va_end(ap);
	return record(q, name, value, (size_t)n);
}

int
launch_orders_encode(const struct launch_orders *o, struct wire_out *out)
{
	char head[64];
	int rc = 0;

	rc |= recordf(out, "version", "%u", o->version);
	rc |= record(out, "secret", o->secret, strlen(o->secret));
	rc |= recordf(out, "host", "%u", o->host);
	rc |= record(out, "name", o->name, strlen(o->name));
	rc |= record(out, "launcher", o->launcher, strlen(o->launcher));
	rc |= recordf(out, "ranks", "%u %u %u", o->base, o->count, o->world);
	rc |= recordf(out, "grace", "%.17g", o->grace);
	rc |= recordf(out, "keepalive", "%.17g", o->keepalive);
	rc |= recordf(out, "address", "%.17g", o->address_s);
	rc |= recordf(out, "connect", "%.17g", o->connect_s);
	rc |= recordf(out, "tag", "%d", o->tag);
	rc |= recordf(out, "machine", "%d", o->machine);
	rc |= recordf(out, "stdin", "%d", o->share_stdin);
	rc |= recordf(out, "verbose", "%d", o->verbosity);
	for (int i = 0; i < o->argc; i++)
		rc |= record(out, "arg", o->argv[i], strlen(o->argv[i]));
	rc |= wire_out_add(out, head, (size_t)snprintf(head, sizeof(head),
	    "input %zu\n", o->input_len));
	return rc != 0 ? -1 : 0;
}

/* One record's header at buf[off..len): 1 with the name and the value's
 * place, 0 when not all there yet, -1 malformed. */
static int
header(const char *buf, size_t len, size_t off, char *name, size_t *value,
    size_t *value_len, char *why, size_t why_size)
{
	const char *nl = memchr(buf + off, '\n', len - off > 48 ? 48 :
	    len - off);
	size_t n = 0, i = off, digits = 0;

	if (nl == NULL) {
		if (len - off < 48)
			return 0;
		snprintf(why, why_size, "a record header at byte %zu is not "
		    "'NAME LENGTH'", off);
		return -1;
	}
	while (i < (size_t)(nl - buf) && buf[i] >= 'a' && buf[i] <= 'z' &&
	    n < 15)
		name[n++] = buf[i++];
	name[n] = '\0';
	if (n == 0 || buf[i++] != ' ')
		goto bad;
	*value_len = 0;
	for (; i < (size_t)(nl - buf); i++, digits++) {
		if (buf[i] < '0' || buf[i] > '9' || digits >= 9)
			goto bad;
		*value_len = *value_len * 10 + (size_t)(buf[i] - '0');
	}
	if (digits == 0)
		goto bad;
	if (*value_len > (strcmp(name, "input") == 0 ? LAUNCH_INPUT_MAX :
	    LAUNCH_ORDER_MAX)) {
		snprintf(why, why_size, "record '%s' of %zu bytes is longer "
		    "than allowed", name, *value_len);
		return -1;
	}
	*value = (size_t)(nl - buf) + 1;
	return 1;
bad:
	snprintf(why, why_size, "a record header at byte %zu is not 'NAME "
	    "LENGTH'", off);
	return -1;
}

int
launch_orders_complete(const char *buf, size_t len, size_t *used, char *why,
    size_t why_size)
{
	size_t off = 0, value, value_len, others = 0;
	char name[16];
	int rc;

	for (;;) {
		if ((rc = header(buf, len, off, name, &value, &value_len, why,
			why_size)) <= 0)
			return rc;
		if (len - value < value_len + 1)
			return 0;
		if (buf[value + value_len] != '\n') {
			snprintf(why, why_size, "record '%s' does not end in a "
			    "newline", name);
			return -1;
		}
		off = value + value_len + 1;
		if (strcmp(name, "input") != 0 &&
		    (others += off - value) > LAUNCH_ORDERS_MAX) {
			snprintf(why, why_size, "the orders are longer than "
			    "%u bytes", LAUNCH_ORDERS_MAX);
			return -1;
		}
		if (strcmp(name, "end") == 0) {
			*used = off;
			return 1;
		}
	}
}

static int
number(const char *v, uint64_t max, uint32_t *out)
{
	char *end;
	unsigned long long n;

	if (v[0] < '0' || v[0] > '9')
		return -1;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0' || n > max)
		return -1;
	*out = (uint32_t)n;
	return 0;
}

static int
seconds(const char *v, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(v, &end);
	return errno != 0 || end == v || *end != '\0' || !(*out >= 0) ||
	    *out > 1e9 ? -1 : 0;
}

static int
flag(const char *v, bool *out)
{
	if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
		return -1;
	*out = v[0] == '1';
	return 0;
}

/* A value copied into a fixed field: no NUL inside, and it fits. */
static int
text(const char *v, size_t n, char *out, size_t size)
{
	if (memchr(v, '\0', n) != NULL || n >= size)
		return -1;
	memcpy(out, v, n + 1);
	return 0;
}

static int
ranks(const char *v, struct launch_orders *o)
{
	unsigned base, count, world;
	int used = 0;

	if (sscanf(v, "%u %u %u%n", &base, &count, &world, &used) != 3 ||
	    v[used] != '\0' || world == 0 || world > LIST_MAX_RANKS ||
	    count == 0 || count > LAUNCH_RANKS_MAX || base >= world ||
	    count > world - base)
		return -1;
	o->base = base;
	o->count = count;
	o->world = world;
	return 0;
}

/* One record; 0, or -1 when its value is not what its name needs. */
static int
apply(struct launch_orders *o, const char *name, char *v, size_t n)
{
	uint32_t u;

	if (strcmp(name, "version") == 0)
		return number(v, UINT32_MAX, &u) != 0 ? -1 :
		    (o->version = u, 0);
	if (strcmp(name, "secret") == 0)
		return n != LAUNCH_SECRET_HEX ? -1 :
		    text(v, n, o->secret, sizeof(o->secret));
	if (strcmp(name, "host") == 0)
		return number(v, HOSTS_MAX - 1, &o->host);
	if (strcmp(name, "name") == 0)
		return text(v, n, o->name, sizeof(o->name));
	if (strcmp(name, "launcher") == 0)
		return text(v, n, o->launcher, sizeof(o->launcher));
	if (strcmp(name, "ranks") == 0)
		return ranks(v, o);
	if (strcmp(name, "grace") == 0)
		return seconds(v, &o->grace);
	if (strcmp(name, "keepalive") == 0)
		return seconds(v, &o->keepalive);
	if (strcmp(name, "address") == 0)
		return seconds(v, &o->address_s);
	if (strcmp(name, "connect") == 0)
		return seconds(v, &o->connect_s);
	if (strcmp(name, "tag") == 0)
		return flag(v, &o->tag);
	if (strcmp(name, "machine") == 0)
		return flag(v, &o->machine);
	if (strcmp(name, "stdin") == 0)
		return flag(v, &o->share_stdin);
	if (strcmp(name, "verbose") == 0)
		return number(v, 9, &u) != 0 ? -1 : (o->verbosity = (int)u, 0);
	return -1;
}

int
launch_orders_decode(char *buf, size_t len, struct launch_orders *o,
    char *why, size_t why_size)
{
	size_t off = 0, value, value_len, used;
	char name[16];
	char **grown;

	memset(o, 0, sizeof(*o));
	if (launch_orders_complete(buf, len, &used, why, why_size) != 1)
		goto incomplete;
	for (;;) {
		header(buf, used, off, name, &value, &value_len, why, why_size);
		off = value + value_len + 1;
		if (strcmp(name, "end") == 0)
			break;
		if (strcmp(name, "input") == 0) {
			o->input = buf + value;
			o->input_len = value_len;
			continue;
		}
		buf[value + value_len] = '\0';
		if (strcmp(name, "arg") == 0) {
			if (memchr(buf + value, '\0', value_len) != NULL)
				goto bad;
			if ((grown = realloc(o->argv, (size_t)(o->argc + 2) *
			    sizeof(*grown))) == NULL) {
				snprintf(why, why_size, "out of memory");
				goto fail;
			}
			o->argv = grown;
			o->argv[o->argc++] = buf + value;
			o->argv[o->argc] = NULL;
		} else if (apply(o, name, buf + value, value_len) != 0) {
			goto bad;
		}
		/* The secret lives on in o alone. */
		if (strcmp(name, "secret") == 0)
			explicit_bzero(buf + value, value_len);
	}
	if (o->version != LAUNCH_WIRE_VERSION) {
		snprintf(why, why_size, "orders of version %u, not %u: the "
		    "launcher runs another build of silvic-ring", o->version,
		    LAUNCH_WIRE_VERSION);
		goto fail;
	}
	if (o->secret[0] == '\0' || o->world == 0 || o->argc < 2 ||
	    o->launcher[0] == '\0') {
		snprintf(why, why_size, "the orders lack a secret, the ranks, "
		    "the launcher's address or the command");
		goto fail;
	}
	return 0;
bad:
	snprintf(why, why_size, "record '%s' has a bad value", name);
	goto fail;
incomplete:
	if (why[0] == '\0')
		snprintf(why, why_size, "the orders are incomplete");
fail:
	free(o->argv);
	o->argv = NULL;
	return -1;
}

/* ------------------------------------------------------------ messages */

static const struct {
	enum launch_msg_kind kind;
	const char *word;
	int numbers;		/* how many of a, b */
	bool text;		/* a word after them */
} kinds[] = {
	{ LAUNCH_MSG_HELLO, "hello", 2, true },
	{ LAUNCH_MSG_ADDRESS, "address", 1, true },
	{ LAUNCH_MSG_EXIT, "exit", 2, false },
	{ LAUNCH_MSG_STATUS, "status", 1, false },
	{ LAUNCH_MSG_START, "start", 0, false },
	{ LAUNCH_MSG_PEER, "peer", 0, true },
	{ LAUNCH_MSG_LIST, "list", 1, false },
	{ LAUNCH_MSG_STOP, "stop", 0, false },
	{ LAUNCH_MSG_ABANDON, "abandon", 0, false },
};

/* The next space-separated word of *p: a printable word, no control
 * characters; NULL at the end or on a bad one. */
static const char *
word(const char **p, size_t *n)
{
	const char *w = *p;

	if (*w != ' ')
		return NULL;
	w++;
	*n = 0;
	while (w[*n] != '\0' && w[*n] != ' ') {
		if ((unsigned char)w[*n] <= ' ' || w[*n] == 0x7f)
			return NULL;
		(*n)++;
	}
	*p = w + *n;
	return *n > 0 ? w : NULL;
}

int
launch_msg_parse(const char *line, struct launch_msg *m)
{
	size_t k, n, len = strlen(line);
	const char *p, *w;
	char num[16];

	if (len >= LAUNCH_MSG_MAX)
		return -1;
	memset(m, 0, sizeof(*m));
	for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		n = strlen(kinds[k].word);
		if (strncmp(line, kinds[k].word, n) == 0 &&
		    (line[n] == ' ' || line[n] == '\0'))
			break;
	}
	if (k == sizeof(kinds) / sizeof(kinds[0]))
		return -1;
	m->kind = kinds[k].kind;
	p = line + strlen(kinds[k].word);
	for (int i = 0; i < kinds[k].numbers; i++) {
		if ((w = word(&p, &n)) == NULL || n >= sizeof(num))
			return -1;
		memcpy(num, w, n);
		num[n] = '\0';
		if (number(num, UINT32_MAX, i == 0 ? &m->a : &m->b) != 0)
			return -1;
	}
	if (kinds[k].text) {
		if ((w = word(&p, &n)) == NULL)
			return -1;
		memcpy(m->text, w, n);
		m->text[n] = '\0';
	}
	return *p == '\0' ? 0 : -1;
}

int
launch_msg_put(struct wire_out *q, const struct launch_msg *m)
{
	char line[LAUNCH_MSG_MAX + 32];
	size_t k;
	int n;

	for (k = 0; kinds[k].kind != m->kind; k++)
		;
	n = snprintf(line, sizeof(line), "%s", kinds[k].word);
	if (kinds[k].numbers > 0)
		n += snprintf(line + n, sizeof(line) - (size_t)n, " %u", m->a);
	if (kinds[k].numbers > 1)
		n += snprintf(line + n, sizeof(line) - (size_t)n, " %u", m->b);
	if (kinds[k].text)
		n += snprintf(line + n, sizeof(line) - (size_t)n, " %s", m->text);
	if (n >= LAUNCH_MSG_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	line[n++] = '\n';
	return wire_out_add(q, line, (size_t)n);
}

/* ------------------------------------------------------------- secrets */

int
launch_secret_new(char secret[LAUNCH_SECRET_HEX + 1])
{
	unsigned char raw[LAUNCH_SECRET_BYTES];
	size_t got = 0;

	while (got < sizeof(raw)) {
		ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(secret + 2 * i, 3, "%02x", raw[i]);
	explicit_bzero(raw, sizeof(raw));
	return 0;
}

bool
launch_secret_equal(const char *a, const char *b)
{
	unsigned char diff = 0;
	size_t n = strlen(a);

	if (n != LAUNCH_SECRET_HEX || strlen(b) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)(a[i] ^ b[i]);
	return diff == 0;
}

/* Keepalives probe an idle connection only; TCP_USER_TIMEOUT also ends
 * one whose sent data stays unacknowledged that long. */
void
launch_keepalive_set(int fd, double keepalive)
{
	int on = 1, idle = (int)(keepalive / 3), count = 3;
	unsigned user = (unsigned)(keepalive * 1000);

	if (idle < 1)
		idle = 1;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof(user));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

/* ----------------------------------------------------------- lines in */

int
wire_in_read(struct wire_in *in, int fd)
{
	ssize_t n;

	if (in->len == sizeof(in->buf)) {
		errno = EMSGSIZE;
		return -1;
	}
	n = read(fd, in->buf + in->len, sizeof(in->buf) - in->len);
	if (n < 0 && errno == EINTR)
		errno = EAGAIN;
	if (n < 0)
		return -1;
	if (n == 0)
		return 0;
	in->len += (size_t)n;
	return 1;
}

int
wire_in_line(struct wire_in *in, char *line, size_t size)
{
	char *nl = memchr(in->buf, '\n', in->len);
	size_t n;

	if (nl == NULL)
		return in->len >= LAUNCH_MSG_MAX ? -1 : 0;
	n = (size_t)(nl - in->buf);
	if (n >= LAUNCH_MSG_MAX || n >= size)
		return -1;
	memcpy(line, in->buf, n);
	line[n] = '\0';
	memmove(in->buf, nl + 1, in->len - n - 1);
	in->len -= n + 1;
	return 1;
}
