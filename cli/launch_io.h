/*
 * launch_io.h - the launcher's end of a rank's stdout or stderr pipe: cuts
 * what the rank writes into lines and writes each one out in one go,
 * tagged "[RANK] " (LAUNCH_TAG) unless it is a JSON record on stdout (a
 * line starting with '{'), which goes out untouched and never in pieces;
 * or as it is (LAUNCH_PLAIN).  Machine output passes byte for byte
 * (LAUNCH_RAW) or not at all (LAUNCH_DROP).
 */
#ifndef SR_LAUNCH_IO_H
#define SR_LAUNCH_IO_H

#include <stdbool.h>
#include <stddef.h>

#define LAUNCH_LINE_MAX		(64u << 10)	/* longer plain lines go out
						 * in pieces, each tagged */
#define LAUNCH_RECORD_MAX	(64u << 20)	/* the longest JSON record */

enum launch_mode {
	LAUNCH_TAG,	/* lines tagged "[RANK] ", JSON records as they are */
	LAUNCH_PLAIN,	/* lines as they are, each in one write */
	LAUNCH_RAW,	/* bytes as they come: one rank's machine output */
	LAUNCH_DROP	/* read and thrown away */
};

struct launch_stream {
	int fd;			/* read end, -1 once closed */
	int to;			/* where its lines go: 1 or 2 */
	int rank;		/* for the tag */
	enum launch_mode mode;
	bool broken;		/* a write failed with EPIPE: no reader */
	bool cut;		/* the line in progress went out in part */
	char *buf;		/* the line in progress; NULL before a read */
	size_t cap, len;
	size_t seen;		/* bytes of buf searched for a newline */
};

/* An empty stream with no descriptor yet (fd -1). */
void launch_stream_init(struct launch_stream *s, int rank, int to,
    enum launch_mode mode);

/*
 * Reads what s->fd holds, at most reads times, and writes out every
 * complete line.  At end of file it writes out a last line without a
 * newline and closes fd.  Returns 0, or -1 when a line could not be
 * written (broken set when for EPIPE) or the stream failed: a JSON
 * record longer than
 * LAUNCH_RECORD_MAX (or than memory allows) is reported and fd closed, so
 * the rank sees EPIPE rather than its record cut in two.
 */
int launch_stream_read(struct launch_stream *s, int reads);

/* From now on what s->fd holds is read and thrown away, the line in
 * progress too. */
void launch_stream_drop(struct launch_stream *s);

/* Closes fd and frees the buffer. */
void launch_stream_fini(struct launch_stream *s);

#endif
