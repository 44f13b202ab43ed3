/*
 * launch_wire.h - what `launch --hosts` and each host's agent say to
 * each other.
 *
 * The orders go over ssh, on the agent's stdin, and never anywhere else:
 * they carry the host's secret.  They are records, each
 *
 *	NAME ' ' LENGTH '\n' VALUE '\n'
 *
 * NAME in [a-z], LENGTH decimal, VALUE any bytes: version, secret, host,
 * name, launcher, ranks ("BASE COUNT WORLD"), grace, keepalive, address,
 * connect, tag, machine, stdin, verbose, arg (once per argv element, in
 * order), input (the stdin every rank gets) and last end (empty).
 * Unknown names are an error: both ends are the same build.
 *
 * The control connection is the agent's TCP connection back to the
 * launcher: lines of at most LAUNCH_MSG_MAX bytes, a word and its
 * arguments separated by one space:
 *
 *	agent -> launcher		launcher -> agent
 *	hello VERSION HOST SECRET	start
 *	address RANK HOST:PORT		peer HOST:PORT  (world of them, in
 *	exit RANK STATUS		list WORLD       rank order, then list)
 *	status STATUS			stop
 *					abandon
 *
 * hello comes first and once; an agent sends its ranks' addresses once
 * all of them published, each rank's exit as it is reaped, and status
 * when its own part failed otherwise (an address deadline).  Kernel
 * keepalives, not messages, tell either side the other is gone
 * (launch_keepalive_set).  The codec is pure; the queue and line reader at the end move bytes on
 * a non-blocking descriptor.
 */
#ifndef SR_LAUNCH_WIRE_H
#define SR_LAUNCH_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hosts.h"
#include "launch.h"

#define LAUNCH_WIRE_VERSION	1
#define LAUNCH_SECRET_BYTES	32
#define LAUNCH_SECRET_HEX	(2 * LAUNCH_SECRET_BYTES)
#define LAUNCH_MSG_MAX		400	/* a control line, newline included */
#define LAUNCH_ORDER_MAX	(64u << 10)	/* a record but the input */
#define LAUNCH_ORDERS_MAX	(1u << 20)	/* the records but the input */

struct launch_orders {
	unsigned version;
	char secret[LAUNCH_SECRET_HEX + 1];
	uint32_t host;			/* its index in the host list */
	char name[HOSTS_NAME_MAX];	/* as the list gives it */
	/* "HOST:PORT", or ":PORT" for the address ssh came from */
	char launcher[LAUNCH_ADDRESS_MAX + 1];
	uint32_t base, count, world;	/* ranks base..base+count-1 of world */
	double grace, keepalive, address_s, connect_s;
	bool tag, machine, share_stdin;
	int verbosity;
	int argc;
	char **argv;		/* argc entries and NULL, into the buffer */
	const char *input;	/* into the buffer */
	size_t input_len;
};

/* A growing buffer of bytes to send. */
struct wire_out {
	char *buf;
	size_t len, off, cap;
};

/*
 * The orders up to and including the input record's header: what
 * follows is the input's input_len bytes, then launch_orders_trailer.
 * The input is not copied, so one stdin serves every host.  0, or -1 out
 * of memory.
 */
int launch_orders_encode(const struct launch_orders *o, struct wire_out *out);
extern const char launch_orders_trailer[];

/*
 * Whether buf[0..len) holds the whole orders: 1 (*used is their length),
 * 0 not yet, -1 malformed (why says how).  Looks only at the records'
 * headers, so a caller can ask again after every read.
 */
int launch_orders_complete(const char *buf, size_t len, size_t *used,
    char *why, size_t why_size);
/*
 * Decodes complete orders in place (values are NUL-terminated where
 * their newline was, the secret's wiped once copied); o->argv is
 * allocated (free it), the strings and o->input point into buf.  0, or
 * -1 with why.
 */
int launch_orders_decode(char *buf, size_t len, struct launch_orders *o,
    char *why, size_t why_size);

enum launch_msg_kind {
	LAUNCH_MSG_HELLO,	/* a: version, b: host, text: secret */
	LAUNCH_MSG_ADDRESS,	/* a: rank, text: host:port */
	LAUNCH_MSG_EXIT,	/* a: rank, b: status */
	LAUNCH_MSG_STATUS,	/* a: status */
	LAUNCH_MSG_START,
	LAUNCH_MSG_PEER,	/* text: host:port */
	LAUNCH_MSG_LIST,	/* a: world */
	LAUNCH_MSG_STOP,
	LAUNCH_MSG_ABANDON
};

struct launch_msg {
	enum launch_msg_kind kind;
	uint32_t a, b;
	char text[LAUNCH_MSG_MAX];
};

/* Parses one control line (no newline); 0, or -1 when it is not one. */
int launch_msg_parse(const char *line, struct launch_msg *m);
/* Appends the message's line, newline included; 0 or -1 (ENOMEM). */
int launch_msg_put(struct wire_out *q, const struct launch_msg *m);

/* 32 random bytes as 64 hex digits; 0, or -1 when getrandom failed. */
int launch_secret_new(char secret[LAUNCH_SECRET_HEX + 1]);
/* Compares two secrets in time that does not depend on where they
 * differ. */
bool launch_secret_equal(const char *a, const char *b);

/* ------------------------------------------- bytes on a descriptor */

/* Kernel keepalives and a send timeout on a control connection: a peer
 * that stops answering (its network cut) ends it within about keepalive
 * seconds, whatever either process is doing meanwhile. */
void launch_keepalive_set(int fd, double keepalive);

int wire_out_add(struct wire_out *q, const void *data, size_t n);
bool wire_out_pending(const struct wire_out *q);
/* Writes what fd takes (non-blocking); 0, or -1 with errno. */
int wire_out_flush(struct wire_out *q, int fd);
void wire_out_free(struct wire_out *q);

/* Control lines as they arrive. */
struct wire_in {
	char buf[4 * LAUNCH_MSG_MAX];
	size_t len;
};

/* Reads what fd holds: 1 bytes read, 0 end of file, -1 error (errno;
 * EAGAIN: nothing there). */
int wire_in_read(struct wire_in *in, int fd);
/* Copies the next whole line out (without its newline): 1, 0 when there
 * is none yet, -1 when a line is longer than LAUNCH_MSG_MAX. */
int wire_in_line(struct wire_in *in, char *line, size_t size);

#endif
