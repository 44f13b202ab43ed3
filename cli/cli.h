/*
 * cli.h - what the command's files share: exit statuses, messages, the
 * options every ring command takes, and the rank's life up to a formed
 * ring (bind, publish, obtain the list, find the rank, form the ring).
 *
 * Only cli/ prints and exits.  Messages go to stderr in git's voice:
 * "silvic-ring: rank 2: timed out ..."; machine output goes to stdout.
 */
#ifndef SR_CLI_H
#define SR_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "silvic_ring.h"

#define CLI_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))

/* Exit statuses; the man page's EXIT STATUS lists the same. */
enum cli_exit {
	EXIT_OK = 0,
	EXIT_CHECK = 1,		/* an expect or a bench check failed */
	EXIT_USAGE = 2,		/* usage or configuration error */
	EXIT_RENDEZVOUS = 3,	/* the address list never became complete */
	EXIT_FORMATION = 4,	/* bind, connect or handshake failed */
	EXIT_COLLECTIVE = 5,	/* peer lost, out of step, silence timeout */
	EXIT_THRESHOLD = 6,	/* bench: busbw below --min-busbw */
	EXIT_AUTH = 7,		/* authentication failed */
	EXIT_INTERNAL = 8,	/* out of memory, output could not be written */
	EXIT_INTERRUPTED = 130,	/* SIGINT or SIGTERM */
	EXIT_PIPE = 141		/* stdout's reader went away: 128 + SIGPIPE */
};

/* Set by the SIGINT/SIGTERM handler; the core's cancel flag points here. */
extern volatile int cli_interrupted;
/* Installs SIGINT/SIGTERM handlers (without SA_RESTART) and ignores
 * SIGPIPE. */
void cli_signals_install(void);
/* Ends the process as a SIGPIPE would (status 141 to the shell), quietly;
 * returns EXIT_PIPE should it survive. */
int cli_exit_pipe(void);

/* ----------------------------------------------------------- messages */

/* 0 quiet, 1 -v (status lines), 2 -vv (debug). */
extern int cli_verbosity;
/* Rank for message prefixes once known, else -1. */
extern int64_t cli_rank;

/* "silvic-ring: <message>\n" on stderr, always. */
void cli_error(const char *fmt, ...) CLI_PRINTF(1, 2);
void cli_warn(const char *fmt, ...) CLI_PRINTF(1, 2);
/* Status lines for -v, fixed and greppable:
 * "silvic-ring: rank 1: listening on 127.0.0.1:4000". */
void cli_status(const char *fmt, ...) CLI_PRINTF(1, 2);
void cli_debug(const char *fmt, ...) CLI_PRINTF(1, 2);
/* With -vv, says when the CPU ring's rank is bound to has changed
 * (--cpus): after each statement or size that could move it. */
void cli_note_cpu(const struct sr_ring *ring);
/*
 * A CPU list as taskset -c writes one ("0,2-3"), or "none" (n = 0), into
 * cpus (CLI_CPUS_MAX of them); 0, or -1 with why (size bytes) saying what
 * is wrong with it.
 */
int cli_parse_cpus(const char *text, int *cpus, uint32_t *n, char *why,
    size_t size);
/*
 * Progress while a rank waits (for the address list, for its neighbours):
 * cli_progress_ms is the interval, 0 for none (cli_ring_open sets it from
 * --progress-interval when stderr is a terminal or with -v).
 * cli_progress_due says whether a line is due now, *next_at holding the
 * time of the next one (0 at first: the first is due one interval after
 * that call).  cli_progress prints one, like cli_error.
 */
extern int64_t cli_progress_ms;
bool cli_progress_due(int64_t *next_at);
void cli_progress(const char *fmt, ...) CLI_PRINTF(1, 2);
/* A usage error: message, then "try 'silvic-ring --help'"; returns
 * EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) CLI_PRINTF(1, 2);

/* The exit status for a core error. */
int cli_exit_for(const struct sr_error *err);
/*
 * Reports a core error: one line on stderr, and with json also a JSON
 * record {"type":"error",...} on stdout.  Returns cli_exit_for(err).
 */
int cli_report(const struct sr_error *err, bool json);

/* --------------------------------------------------------------- JSON */

/* Writes s as a JSON string literal (quotes included) to out. */
void json_string(FILE *out, const char *s);
/* Writes a finite double; NaN and infinities become null. */
void json_number(FILE *out, double v);

/* ------------------------------------------------------------- time */

/* Sleeps ms milliseconds but not past deadline_ns (sr_clock_ns); -1 when
 * interrupted (cli_interrupted set), else 0. */
int cli_nap(int ms, int64_t deadline_ns);

/* ------------------------------------------------------------ files */

/*
 * Opens a file for reading without ever blocking in open or read: a
 * FIFO's open and read wait for a writer past every deadline, so a FIFO,
 * a directory, a device or a socket is refused, and with nofollow so is
 * a symbolic link (the last component; for files in a directory others
 * may write).  Returns a blocking, close-on-exec descriptor of a regular
 * file (st filled when non-NULL), or -1 with errno set and why saying
 * what the path is ("a FIFO (named pipe), not a regular file") or
 * strerror(errno).
 */
int cli_open_regular(const char *path, bool nofollow, struct stat *st,
    char *why, size_t why_size);

/*
 * Reads a whole small regular file (at most 16 MiB; never a FIFO: see
 * cli_open_regular; with nofollow never through a symbolic link).
 * Returns it NUL-terminated (free it), its length in *len, or NULL with
 * errno set (ENOENT when it does not exist) and why.
 */
char *cli_read_file(const char *path, bool nofollow, struct stat *st,
    size_t *len, char *why, size_t why_size);

/*
 * This program's own path, to run it again (launch's ranks, and the
 * default path ssh runs on other hosts): /proc/self/exe, or where there
 * is no /proc (a chroot without it) argv[0] as the shell found it: a
 * path when it has a slash, else the first executable file of that name
 * on PATH.  Absolute; free it.  NULL with errno set when neither is.
 */
char *cli_self_path(void);

/*
 * Says on stderr that cli_self_path found nothing (errno its reason),
 * what the path was for ("to run the ranks") and what to do instead
 * (appended as it is: "" or "; give --remote-path").
 */
void cli_self_path_error(const char *purpose, const char *advice);

/*
 * The length of a key read from a file of n bytes: a key typed into a
 * text file ends in one newline that is not part of it ("\n" or "\r\n",
 * once); a key with any byte outside printable ASCII and tab is binary
 * (head -c 32 /dev/urandom) and used byte for byte, a final 0x0a too.
 * Ranks and `serve` trim alike, or their derived tokens would differ.
 */
size_t cli_key_length(const uint8_t *key, size_t n);

/* ---------------------------------------------------------- numbers */

/*
 * Parses a size with an optional binary suffix (K, M, G, T; "KiB" etc. and
 * lower case too): "64M" = 67108864.  -1 when it is not a size.
 */
int cli_parse_size(const char *text, uint64_t *out);
/* Parses a whole number in [min, max]; -1 when it is not. */
int cli_parse_uint(const char *text, uint64_t min, uint64_t max,
    uint64_t *out);
/* Parses seconds ("30", "0.5"); -1 when not a positive number. */
int cli_parse_seconds(const char *text, double *out);

/* ------------------------------------------------- the ring options */

/* The most CPUs --cpus may list. */
#define CLI_CPUS_MAX 1024

/*
 * The options of every command that forms a ring (run, bench).  Each
 * command's getopt_long table includes CLI_RING_LONGOPTS and hands unknown
 * option codes to cli_ring_option.
 */
struct cli_ring {
	const char *host;	/* --host */
	const char *advertise;	/* --advertise IP|IFNAME */
	int64_t port;		/* --port, -1 for none */
	const char *peers;	/* --peers SOURCE */
	int64_t rank;		/* --rank, -1 for none */
	int64_t world;		/* --world, -1 for none */
	const char *token;	/* --token */
	double timeout;		/* --timeout seconds */
	bool print_address;	/* --print-address */
	const char *address_file;	/* --address-file */
	bool dry_run;		/* --dry-run */
	bool json;		/* --json */
	const char *key_file;	/* --key-file */
	bool integrity;		/* --integrity */
	bool mesh;		/* --mesh */
	uint32_t streams;	/* --streams, 1 .. SR_RING_STREAMS_MAX */
	int shared_cores;	/* --[no-]shared-cores: 1, 0, -1 neither */
	const char *cpus;	/* --cpus LIST|none, NULL when not given */
	/* bench connect: probe for this long (seconds, > 0) instead of
	 * forming; cli_ring_open then fills *probe (world entries, the
	 * caller frees them). */
	double probe;
	struct sr_probe_link **probe_report;
	const char *congestion;	/* --tcp-congestion; NULL: the system's */
	double progress;	/* --progress-interval seconds */
};

enum {
	OPT_HOST = 1000,
	OPT_ADVERTISE,
	OPT_PORT,
	OPT_PEERS,
	OPT_RANK,
	OPT_WORLD,
	OPT_TOKEN,
	OPT_TIMEOUT,
	OPT_PRINT_ADDRESS,
	OPT_ADDRESS_FILE,
	OPT_DRY_RUN,
	OPT_JSON,
	OPT_KEY_FILE,
	OPT_INTEGRITY,
	OPT_TCP_CONGESTION,
	OPT_PROGRESS_INTERVAL,
	OPT_MESH,
	OPT_STREAMS,
	OPT_SHARED_CORES,
	OPT_NO_SHARED_CORES,
	OPT_CPUS,
	OPT_VERBOSE = 'v',
	OPT_COMMAND_BASE = 1100	/* command-specific options start here */
};

#define CLI_RING_LONGOPTS                                                      \
	{ "host", required_argument, NULL, OPT_HOST },                         \
	{ "advertise", required_argument, NULL, OPT_ADVERTISE },               \
	{ "port", required_argument, NULL, OPT_PORT },                         \
	{ "peers", required_argument, NULL, OPT_PEERS },                       \
	{ "rank", required_argument, NULL, OPT_RANK },                         \
	{ "world", required_argument, NULL, OPT_WORLD },                       \
	{ "token", required_argument, NULL, OPT_TOKEN },                       \
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },                   \
	{ "print-address", no_argument, NULL, OPT_PRINT_ADDRESS },             \
	{ "address-file", required_argument, NULL, OPT_ADDRESS_FILE },         \
	{ "dry-run", no_argument, NULL, OPT_DRY_RUN },                         \
	{ "json", no_argument, NULL, OPT_JSON },                               \
	{ "key-file", required_argument, NULL, OPT_KEY_FILE },                 \
	{ "integrity", no_argument, NULL, OPT_INTEGRITY },                     \
	{ "mesh", no_argument, NULL, OPT_MESH },                               \
	{ "streams", required_argument, NULL, OPT_STREAMS },                   \
	{ "shared-cores", no_argument, NULL, OPT_SHARED_CORES },               \
	{ "no-shared-cores", no_argument, NULL, OPT_NO_SHARED_CORES },         \
	{ "cpus", required_argument, NULL, OPT_CPUS },                         \
	{ "tcp-congestion", required_argument, NULL, OPT_TCP_CONGESTION },     \
	{ "verbose", no_argument, NULL, OPT_VERBOSE },                         \
	{ "progress-interval", required_argument, NULL, OPT_PROGRESS_INTERVAL }

/* The help text of those options, for each command's --help. */
extern const char cli_ring_help[];

void cli_ring_init(struct cli_ring *opts);
/*
 * Applies one ring option (c from getopt_long, arg optarg).  Returns 1
 * when it was one, 0 when c is not a ring option, or -1 after reporting a
 * usage error (the caller exits EXIT_USAGE).
 */
int cli_ring_option(struct cli_ring *opts, int c, const char *arg);

/*
 * A rank's life up to a formed ring.  On success *ring is formed (or NULL
 * after --dry-run printed the plan, with EXIT_OK returned and *ring NULL).
 * On failure the error was reported and the exit status is returned.
 * hosts gets the address list (world entries, owned by the caller: free
 * with cli_addresses_free) when non-NULL.  Gives SIGPIPE back its default
 * action: a rank whose standard output is gone dies of it, as cat does.
 */
int cli_ring_open(struct cli_ring *opts, struct sr_ring **ring,
    char ***addresses, uint64_t *world);
void cli_addresses_free(char **addresses, uint64_t world);
/*
 * A command's end on its ring: the close every rank agrees on
 * (sr_ring_finish) when rc is EXIT_OK or EXIT_THRESHOLD (a verdict, not
 * a failure: its ranks still agree) and the ring has not failed, the
 * ring closed, the address list
 * freed, stdout flushed.  Returns rc, or the close's or the flush's
 * failure when rc was EXIT_OK.
 */
int cli_ring_done(struct sr_ring *ring, char **addresses, uint64_t world,
    int rc, bool json);

/*
 * launch checks its command once before starting ranks: it runs the
 * command's own option parsing with cli_preflight set, and the command,
 * once its options are parsed and before it does anything, hands over
 * what launch needs (cli_preflight_stop returns true: the command then
 * returns EXIT_OK at once).  Without cli_preflight it returns false.
 */
struct cli_preflight {
	bool reached;		/* the command's options were all good */
	bool json, csv, dry_run, script_stdin;
	int64_t port;		/* --port, -1 for none */
	double timeout;		/* --timeout */
};
extern struct cli_preflight *cli_preflight;
bool cli_preflight_stop(const struct cli_ring *opts, bool csv,
    const char *script);

/* ---------------------------------------------------------- commands */

int cmd_run(int argc, char **argv);
int cmd_launch(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
