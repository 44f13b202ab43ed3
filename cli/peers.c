/*
 * peers.c - the rendezvous backends that need no network service: a file
 * (plain list or MLX hostfile), an environment variable, a shared
 * directory, and the local launcher's socket.  Each waits with a deadline
 * and says what it was waiting for when it gives up.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "rendezvous.h"

/* How often a waiting rank looks at a file or directory again. */
#define POLL_MS 50
/* How long a look at whether a rank's address takes connections may
 * wait for an answer: a refusal comes back in a round trip. */
#define PROBE_MS 500

static void
interrupted(struct sr_error *err, const char *what)
{
	sr_error_set(err, SR_EINTERRUPTED, SR_PHASE_RENDEZVOUS, "interrupted "
	    "while waiting for %s", what);
}

int
write_atomically(const char *path, const char *text, char *why,
    size_t why_size)
{
	char tmp[4096];
	size_t len = strlen(text);
	int fd, saved;

	/*
	 * In a directory others may write, a predictable temporary name
	 * opened with O_CREAT|O_TRUNC follows whatever link another user
	 * planted there: mkostemp creates a new file (O_EXCL, which never
	 * follows a link) under a name nobody can guess, and rename
	 * replaces a link at path rather than writing through it.
	 */
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >=
	    (int)sizeof(tmp)) {
		snprintf(why, why_size, "'%s': the path is too long", path);
		return -1;
	}
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		snprintf(why, why_size, "writing '%s': %s", path, strerror(errno));
		return -1;
	}
	if (fchmod(fd, 0644) != 0 || write(fd, text, len) != (ssize_t)len ||
	    fsync(fd) != 0) {
		saved = errno;
		close(fd);
		unlink(tmp);
		snprintf(why, why_size, "writing '%s': %s", path, strerror(saved));
		return -1;
	}
	if (close(fd) != 0 || rename(tmp, path) != 0) {
		saved = errno;
		unlink(tmp);
		snprintf(why, why_size, "writing '%s': %s", path, strerror(saved));
		return -1;
	}
	return 0;
}

int
rendezvous_check_dir(const char *dir, const char *what, bool keyed,
    char *why, size_t why_size)
{
	struct stat st;
	uid_t me = geteuid();

	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return 0;	/* the caller's own use says what is wrong */
	if ((st.st_mode & S_IWOTH) != 0 && (st.st_mode & S_ISVTX) == 0)
		snprintf(why, why_size, "%s '%s' is writable by every user and "
		    "has no sticky bit: another user can replace or remove "
		    "this job's files there and plant the addresses its ranks "
		    "dial", what, dir);
	else if (st.st_uid != me && st.st_uid != 0)
		snprintf(why, why_size, "%s '%s' is owned by user %lu, not by "
		    "this user (%lu): that user can replace this job's files "
		    "there and plant the addresses its ranks dial", what, dir,
		    (unsigned long)st.st_uid, (unsigned long)me);
	else
		return 0;
	if (keyed)
		return -1;
	cli_warn("%s", why);
	return 1;
}

/* ----------------------------------------------------------------- file */

/* 1 complete, 0 not yet (missing or short), -1 error; *have = entries. */
static int
file_read_list(struct rendezvous *r, int64_t world, struct peer_list *list,
    uint64_t *have, bool *exists, struct sr_error *err)
{
	char why[400], *text;
	size_t len;

	*have = 0;
	*exists = false;
	text = cli_read_file(r->source, false, NULL, &len, why, sizeof(why));
	if (text == NULL) {
		if (errno == ENOENT)
			return 0;
		sr_error_set(err, errno == ENOMEM ? SR_ENOMEM : SR_ECONFIG,
		    errno == ENOMEM ? SR_PHASE_RENDEZVOUS : SR_PHASE_CONFIG,
		    "cannot read the address list '%s' (%s): %s", r->source,
		    r->origin, why);
		return -1;
	}
	*exists = true;
	if (list_parse(text, len, r->source, list, why, sizeof(why)) != 0) {
		free(text);
		sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "%s", why);
		return -1;
	}
	free(text);
	*have = list->n;
	if (world >= 0 && list->n > (uint64_t)world) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "%s lists %llu "
		    "addresses but the world size is %lld (%s)", r->source,
		    (unsigned long long)list->n, (long long)world,
		    r->world_source != NULL ? r->world_source : "given");
		peer_list_free(list);
		return -1;
	}
	if (list->n == 0 || (world >= 0 && list->n < (uint64_t)world)) {
		peer_list_free(list);
		return 0;
	}
	return 1;
}

static int
file_preload(struct rendezvous *r, int64_t world, struct peer_list *list,
    struct sr_error *err)
{
	uint64_t have;
	bool exists;

	return file_read_list(r, world, list, &have, &exists, err);
}

/* The seconds left until deadline, for a progress line. */
static double
left_s(int64_t deadline)
{
	int64_t ms = (deadline - sr_clock_ns()) / 1000000;

	return ms <= 0 ? 0 : ms >= 10000 ? (double)(ms / 1000) :
	    (double)(ms / 100) / 10;
}

static void
file_progress(struct rendezvous *r, int64_t world, uint64_t have,
    bool exists, int64_t deadline)
{
	if (!exists)
		cli_progress("waiting for the address list %s: the file does "
		    "not exist yet; %gs left", r->source, left_s(deadline));
	else if (world >= 0)
		cli_progress("waiting for the address list %s: it lists %llu "
		    "of %lld addresses; %gs left", r->source,
		    (unsigned long long)have, (long long)world, left_s(deadline));
	else
		cli_progress("waiting for the address list %s: it lists no "
		    "address yet; %gs left", r->source, left_s(deadline));
}

static int
file_wait(struct rendezvous *r, int64_t world, int64_t deadline,
    struct peer_list *list, struct sr_error *err)
{
	uint64_t have = 0;
	bool exists = false;
	int64_t progress_at = 0;
	int rc;

	cli_status("waiting for the address list in %s", r->source);
	for (;;) {
		rc = file_read_list(r, world, list, &have, &exists, err);
		if (rc != 0)
			return rc > 0 ? 0 : -1;
		if (sr_clock_ns() >= deadline)
			break;
		if (cli_progress_due(&progress_at))
			file_progress(r, world, have, exists, deadline);
		if (cli_nap(POLL_MS, deadline) != 0) {
			interrupted(err, r->source);
			return -1;
		}
	}
	if (!exists)
		sr_error_set(err, SR_ETIMEOUT, SR_PHASE_RENDEZVOUS, "waiting "
		    "for %s: the file does not exist after %gs", r->source,
		    r->timeout);
	else if (world >= 0)
		sr_error_set(err, SR_ETIMEOUT, SR_PHASE_RENDEZVOUS, "waiting "
		    "for %s: %llu of %lld addresses after %gs (the world size "
		    "comes from %s)", r->source, (unsigned long long)have,
		    (long long)world, r->timeout, r->world_source != NULL ?
		    r->world_source : "the command line");
	else
		sr_error_set(err, SR_ETIMEOUT, SR_PHASE_RENDEZVOUS, "waiting "
		    "for %s: it lists no address after %gs", r->source,
		    r->timeout);
	return -1;
}

int
rendezvous_no_publish(struct rendezvous *r, const char *address, int64_t *rank,
    int64_t world, struct sr_error *err)
{
	return 0;
}

int
rendezvous_no_done(struct rendezvous *r, struct sr_ring *ring, struct sr_error *err)
{
	return 0;
}

void
rendezvous_no_close(struct rendezvous *r)
{
}

const struct rendezvous_backend rendezvous_file = {
	.name = "file",
	.preload = file_preload,
	.publish = rendezvous_no_publish,
	.wait = file_wait,
	.done = rendezvous_no_done,
	.close = rendezvous_no_close
};

/* ------------------------------------------------------------------ env */

static int
env_preload(struct rendezvous *r, int64_t world, struct peer_list *list,
    struct sr_error *err)
{
	const char *value = getenv(r->source);
	char why[400], name[300];

	if (value == NULL)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "env:%s: "
		    "the variable is not set", r->source);
	snprintf(name, sizeof(name), "env:%s", r->source);
	if (list_parse_words(value, name, list, why, sizeof(why)) != 0)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "%s",
		    why);
	if (list->n == 0)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "env:%s lists no address", r->source);
	return 1;
}

static int
env_wait(struct rendezvous *r, int64_t world, int64_t deadline,
    struct peer_list *list, struct sr_error *err)
{
	return env_preload(r, world, list, err) > 0 ? 0 : -1;
}

const struct rendezvous_backend rendezvous_env = {
	.name = "env",
	.preload = env_preload,
	.publish = rendezvous_no_publish,
	.wait = env_wait,
	.done = rendezvous_no_done,
	.close = rendezvous_no_close
};

/* ------------------------------------------------------------------ dir */

/*
 * Each rank writes PATH/JOB.rank.R (atomically) holding its address, then
 * reads every rank's file.  JOB keys the files to this job, so files left
 * by an earlier job are never read as this one's; a rank removes its own
 * file once the ring has formed.  A rank killed outright (SIGKILL) leaves
 * its file behind, and a rerun of the job may read that dead address
 * before the new rank rewrites it: the address this rank dials is looked
 * at first, and while it refuses connections its file is read again.
 */
struct dir_state {
	char mine[4096];
	int64_t rank;
	bool done;	/* the ring formed: the file was removed */
	char stale[SR_ADDR_MAX];	/* the next rank's refusing address */
};

static int
dir_path(const struct rendezvous *r, int64_t rank, char *buf, size_t size)
{
	return snprintf(buf, size, "%s/%s.rank.%lld", r->source, r->job,
	    (long long)rank) >= (int)size ? -1 : 0;
}

static int
dir_preload(struct rendezvous *r, int64_t world, struct peer_list *list,
    struct sr_error *err)
{
	struct stat st;
	char why[600];

	if (stat(r->source, &st) != 0)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "dir:%s: %s", r->source, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "dir:%s: not a directory", r->source);
	if (r->job == NULL)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "dir:%s "
		    "needs a job id so that files of an earlier job are never "
		    "read as this one's: pass --token or set SILVIC_RING_JOB "
		    "(Slurm, Open MPI and PMIx jobs have one already)",
		    r->source);
	if (rendezvous_check_dir(r->source, "the dir: directory", r->keyed, why,
		sizeof(why)) < 0)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "%s; "
		    "refused because a key is configured (use a directory only "
		    "this user can write: mkdir -m 700)", why);
	return 0;
}

static int
dir_publish(struct rendezvous *r, const char *address, int64_t *rank,
    int64_t world, struct sr_error *err)
{
	struct dir_state *st;
	char text[SR_ADDR_MAX + 2], why[600];

	if (*rank < 0 || world < 0)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "dir:%s "
		    "needs this rank's number and the world size (--rank and "
		    "--world, or a launcher's environment)", r->source);
	if ((st = calloc(1, sizeof(*st))) == NULL)
		return sr_error_set(err, SR_ENOMEM, SR_PHASE_RENDEZVOUS,
		    "out of memory");
	r->state = st;
	st->rank = *rank;
	if (dir_path(r, *rank, st->mine, sizeof(st->mine)) != 0)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "dir:%s: the path is too long", r->source);
	snprintf(text, sizeof(text), "%s\n", address);
	if (write_atomically(st->mine, text, why, sizeof(why)) != 0)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "dir:%s: %s", r->source, why);
	return 0;
}

/* Reads rank i's file into slot i; 1 read, 0 not there (yet), -1. */
static int
dir_read_rank(struct rendezvous *r, int64_t i, char **slot,
    struct sr_error *err)
{
	char path[4096], why[600], *text;
	struct peer_list one;
	struct stat st;
	size_t len;

	dir_path(r, i, path, sizeof(path));
	/* Never through a link: another user could point it anywhere. */
	if ((text = cli_read_file(path, true, &st, &len, why, sizeof(why))) ==
	    NULL) {
		if (errno == ENOENT)
			return 0;
		sr_error_set(err, errno == ENOMEM ? SR_ENOMEM : SR_ECONFIG,
		    errno == ENOMEM ? SR_PHASE_RENDEZVOUS : SR_PHASE_CONFIG,
		    "dir:%s: rank %lld's file %s: %s", r->source, (long long)i,
		    path, why);
		return -1;
	}
	/* Even in a directory with the sticky bit (/tmp), another user can
	 * create this job's file before its rank does. */
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		snprintf(why, sizeof(why), "dir: rank %lld's file %.400s is "
		    "owned by user %lu, not by this user (%lu): another user "
		    "may have planted the address it names", (long long)i,
		    path, (unsigned long)st.st_uid,
		    (unsigned long)geteuid());
		if (r->keyed) {
			free(text);
			sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "%s; "
			    "refused because a key is configured", why);
			return -1;
		}
		cli_warn("%s", why);
	}
	if (list_parse(text, len, path, &one, why, sizeof(why)) != 0) {
		free(text);
		sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "%s", why);
		return -1;
	}
	free(text);
	if (one.n != 1) {
		peer_list_free(&one);
		sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "%s: a rank's "
		    "file must hold exactly one address", path);
		return -1;
	}
	*slot = one.addr[0];
	one.addr[0] = NULL;
	one.n = 0;
	peer_list_free(&one);
	return 1;
}

/*
 * One look at the directory: reads the file of every rank that appeared
 * since the last look (each file once; a directory listing a round, not
 * a stat per rank).  Returns the number present, or -1.
 */
static int64_t
dir_look(struct rendezvous *r, int64_t world, char **slots, int64_t have,
    struct sr_error *err)
{
	size_t prefix = strlen(r->job) + strlen(".rank.");
	struct dirent *e;
	DIR *d = opendir(r->source);

	if (d == NULL)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "dir:%s: %s", r->source, strerror(errno));
	while ((e = readdir(d)) != NULL) {
		uint64_t i;
		int rc;

		if (strncmp(e->d_name, r->job, strlen(r->job)) != 0 ||
		    strncmp(e->d_name + strlen(r->job), ".rank.", 6) != 0 ||
		    cli_parse_uint(e->d_name + prefix, 0, (uint64_t)world - 1,
			&i) != 0 || slots[i] != NULL)
			continue;
		rc = dir_read_rank(r, (int64_t)i, &slots[i], err);
		if (rc < 0) {
			closedir(d);
			return -1;
		}
		have += rc;
	}
	closedir(d);
	return have;
}

/*
 * Whether nobody listens at address: 1 when a connection is refused, 0
 * when it is accepted, or there is no answer within PROBE_MS (a host
 * that drops packets: forming the ring will say), or the address is a
 * name (resolving it is the ring's business, bounded there).
 */
static int
refuses(const char *address, int64_t deadline)
{
	char host[SR_ADDR_MAX], service[8];
	struct addrinfo hints, *res = NULL;
	struct pollfd pfd;
	int fd, rc = 0, soerr = 0;
	socklen_t len = sizeof(soerr);
	uint16_t port;
	int64_t left;

	if (sr_address_split(address, host, sizeof(host), &port, NULL, 0) !=
	    SR_ADDRESS_OK)
		return 0;
	snprintf(service, sizeof(service), "%u", (unsigned)port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	if (getaddrinfo(host, service, &hints, &res) != 0 || res == NULL)
		return 0;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
		if (errno == ECONNREFUSED) {
			rc = 1;
		} else if (errno == EINPROGRESS) {
			left = (deadline - sr_clock_ns()) / 1000000;
			pfd.fd = fd;
			pfd.events = POLLOUT;
			if (poll(&pfd, 1, (int)(left < PROBE_MS ? (left > 0 ?
			    left : 0) : PROBE_MS)) == 1 &&
			    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr,
				&len) == 0 && soerr == ECONNREFUSED)
				rc = 1;
		}
	}
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
	return rc;
}

/*
 * With every file read: the address this rank dials must take
 * connections, or its file is one a dead rank left.  1 fine, 0 when the
 * next rank's slot was emptied to be read again.
 */
static int
dir_check_next(struct rendezvous *r, int64_t world, char **slots)
{
	struct dir_state *st = r->state;
	int64_t next;

	if (st == NULL || world < 2)
		return 1;
	next = (st->rank + 1) % world;
	if (!refuses(slots[next], sr_clock_ns() + PROBE_MS * 1000000LL)) {
		st->stale[0] = '\0';
		return 1;
	}
	if (strcmp(st->stale, slots[next]) != 0)
		cli_status("dir:%s: rank %lld's file names %s, which refuses "
		    "connections (left by a rank that died?); reading it again "
		    "until its rank rewrites it", r->source, (long long)next,
		    slots[next]);
	snprintf(st->stale, sizeof(st->stale), "%s", slots[next]);
	free(slots[next]);
	slots[next] = NULL;
	return 0;
}

static void
dir_missing(char **slots, int64_t world, char *buf, size_t size)
{
	int shown = 0;

	buf[0] = '\0';
	for (int64_t i = 0; i < world && shown < 8; i++)
		if (slots[i] == NULL) {
			size_t n = strlen(buf);

			snprintf(buf + n, size - n, "%s%lld", shown++ ? ", " :
			    "; missing rank ", (long long)i);
		}
}

/* Who has published so far, with their addresses, and who has not. */
static void
dir_progress(struct rendezvous *r, char **slots, int64_t world, int64_t have,
    int64_t deadline)
{
	char there[400] = "", missing[200];
	int shown = 0;

	for (int64_t i = 0; i < world && shown < 8; i++)
		if (slots[i] != NULL) {
			size_t n = strlen(there);

			snprintf(there + n, sizeof(there) - n, "%s%lld (%s)",
			    shown++ ? ", " : "; present rank ", (long long)i,
			    slots[i]);
		}
	dir_missing(slots, world, missing, sizeof(missing));
	cli_progress("waiting for dir:%s: %lld of %lld addresses%s%s; %gs left",
	    r->source, (long long)have, (long long)world, there, missing,
	    left_s(deadline));
}

static int
dir_wait(struct rendezvous *r, int64_t world, int64_t deadline,
    struct peer_list *list, struct sr_error *err)
{
	struct dir_state *st = r->state;
	char missing[200], stale[SR_ADDR_MAX + 160];
	char **slots = calloc((size_t)world, sizeof(char *));
	int64_t have = 0, progress_at = 0;
	int rc = -1;

	if (slots == NULL)
		return sr_error_set(err, SR_ENOMEM, SR_PHASE_RENDEZVOUS,
		    "out of memory");
	for (;;) {
		if ((have = dir_look(r, world, slots, have, err)) < 0)
			break;
		if (have == world && dir_check_next(r, world, slots)) {
			list->addr = slots;
			list->n = (uint64_t)world;
			return 0;
		}
		if (have == world)
			have--;
		if (sr_clock_ns() >= deadline) {
			dir_missing(slots, world, missing, sizeof(missing));
			stale[0] = '\0';
			if (st != NULL && st->stale[0] != '\0')
				snprintf(stale, sizeof(stale), "; rank %lld's "
				    "file names %s, which refuses connections "
				    "(left by a rank that died, and not "
				    "rewritten)", (long long)((st->rank + 1) %
				    world), st->stale);
			sr_error_set(err, SR_ETIMEOUT, SR_PHASE_RENDEZVOUS,
			    "waiting for dir:%s: %lld of %lld addresses after "
			    "%gs%s%s", r->source, (long long)have,
			    (long long)world, r->timeout, missing, stale);
			break;
		}
		if (cli_progress_due(&progress_at))
			dir_progress(r, slots, world, have, deadline);
		if (cli_nap(POLL_MS, deadline) != 0) {
			interrupted(err, r->source);
			break;
		}
	}
	for (int64_t i = 0; i < world; i++)
		free(slots[i]);
	free(slots);
	return rc;
}

/* A rank's file goes once every rank has read it: after a barrier. */
static int
dir_done(struct rendezvous *r, struct sr_ring *ring, struct sr_error *err)
{
	struct dir_state *st = r->state;

	if (sr_barrier(ring, err) != 0)
		return -1;
	if (st != NULL && st->mine[0] != '\0')
		unlink(st->mine);
	if (st != NULL)
		st->done = true;
	return 0;
}

/* A rank that fails takes its file with it, or a rerun of the job would
 * read its dead address. */
static void
dir_close(struct rendezvous *r)
{
	struct dir_state *st = r->state;

	if (st != NULL && !st->done && st->mine[0] != '\0')
		unlink(st->mine);
	free(r->state);
	r->state = NULL;
}

const struct rendezvous_backend rendezvous_dir = {
	.name = "dir",
	.waits_for_ranks = true,
	.preload = dir_preload,
	.publish = dir_publish,
	.wait = dir_wait,
	.done = dir_done,
	.close = dir_close
};

/* ------------------------------------------------------------- launcher */

/*
 * The local launcher (silvic-ring launch) hands each rank one end of a
 * socket pair: the rank writes "ADDRESS\n", the launcher answers with
 * every rank's address, one a line, then an empty line.
 */
static int
launch_fd(const struct rendezvous *r)
{
	return atoi(r->source);
}

static int
launch_preload(struct rendezvous *r, int64_t world, struct peer_list *list,
    struct sr_error *err)
{
	return 0;
}

static int
launch_publish(struct rendezvous *r, const char *address, int64_t *rank,
    int64_t world, struct sr_error *err)
{
	char line[SR_ADDR_MAX + 2];
	int n = snprintf(line, sizeof(line), "%s\n", address);

	if (write(launch_fd(r), line, (size_t)n) != n)
		return sr_error_set(err, SR_EIO, SR_PHASE_RENDEZVOUS,
		    "publishing this rank's address to the launcher: %s",
		    strerror(errno));
	return 0;
}

static int
launch_wait(struct rendezvous *r, int64_t world, int64_t deadline,
    struct peer_list *list, struct sr_error *err)
{
	/* The longest list: LIST_MAX_RANKS addresses of SR_ADDR_MAX - 1
	 * bytes and their newlines, the empty line.  In BSS, untouched
	 * pages cost nothing. */
	static char buf[(size_t)SR_ADDR_MAX * LIST_MAX_RANKS + 2];
	size_t n = 0;
	char why[400];

	for (;;) {
		struct pollfd pfd = { .fd = launch_fd(r), .events = POLLIN };
		int64_t left = (deadline - sr_clock_ns()) / 1000000;
		ssize_t got;
		int rc;

		if (n >= 2 && memcmp(buf + n - 2, "\n\n", 2) == 0)
			break;
		if (n == 1 && buf[0] == '\n')
			break;
		if (left <= 0)
			return sr_error_set(err, SR_ETIMEOUT,
			    SR_PHASE_RENDEZVOUS, "waiting for the launcher's "
			    "address list: nothing complete after %gs",
			    r->timeout);
		rc = poll(&pfd, 1, (int)(left > 1000 ? 1000 : left));
		if (cli_interrupted) {
			interrupted(err, "the launcher");
			return -1;
		}
		/* Read only what poll says is there: a blocking read would
		 * outlive the deadline and a signal. */
		if (rc <= 0)
			continue;
		got = read(pfd.fd, buf + n, sizeof(buf) - 1 - n);
		if (got < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (got > 0 && n + (size_t)got >= sizeof(buf) - 1)
			return sr_error_set(err, SR_ECONFIG, SR_PHASE_RENDEZVOUS,
			    "the launcher's address list is longer than %zu "
			    "bytes", sizeof(buf) - 2);
		if (got <= 0)
			return sr_error_set(err, SR_ETIMEOUT,
			    SR_PHASE_RENDEZVOUS, "the launcher closed before "
			    "sending the address list (another rank failed?)");
		n += (size_t)got;
	}
	if (list_parse(buf, n, "the launcher's list", list, why,
		sizeof(why)) != 0)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "%s",
		    why);
	if (world >= 0 && list->n != (uint64_t)world) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "the launcher "
		    "sent %llu addresses for a world of %lld",
		    (unsigned long long)list->n, (long long)world);
		peer_list_free(list);
		return -1;
	}
	return 0;
}

static void
launch_close(struct rendezvous *r)
{
	close(launch_fd(r));
}

const struct rendezvous_backend rendezvous_launch = {
	.name = "launch",
	.plan_source = "exchanged by the launcher",
	.dry_run_exchanges = true,
	.waits_for_ranks = true,
	.started_ranks = true,
	.preload = launch_preload,
	.publish = launch_publish,
	.wait = launch_wait,
	.done = rendezvous_no_done,
	.close = launch_close
};

/* ------------------------------------------------------------ choosing */

int
rendezvous_open(struct rendezvous *r, const char *source, const char *origin,
    struct sr_error *err)
{
	static const struct {
		const char *prefix;
		const struct rendezvous_backend *backend;
		bool keep_prefix;
	} kinds[] = {
		{ "env:", &rendezvous_env, false },
		{ "dir:", &rendezvous_dir, false },
		{ "launch:", &rendezvous_launch, false },
		{ "http://", &rendezvous_http, true },
		{ "https://", &rendezvous_http, true },
		{ "file:", &rendezvous_file, false },
		{ "dns:", &rendezvous_dns, false },
		{ "slurm:", &rendezvous_slurm, true },
	};
	const char *rest = source;

	memset(r, 0, sizeof(*r));
	r->origin = origin;
	r->backend = &rendezvous_file;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strncmp(source, kinds[i].prefix, strlen(kinds[i].prefix)) ==
		    0) {
			r->backend = kinds[i].backend;
			rest = kinds[i].keep_prefix ? source :
			    source + strlen(kinds[i].prefix);
			break;
		}
	/* dns: says itself what it lacks. */
	if (rest[0] == '\0' && r->backend != &rendezvous_dns)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "%s '%s' names no %s", origin, source,
		    r->backend == &rendezvous_env ? "variable" : "path");
	if ((r->source = strdup(rest)) == NULL)
		return sr_error_set(err, SR_ENOMEM, SR_PHASE_RENDEZVOUS,
		    "out of memory");
	return 0;
}

void
rendezvous_close(struct rendezvous *r)
{
	if (r->backend != NULL && r->source != NULL)
		r->backend->close(r);
	free(r->source);
	r->source = NULL;
}
