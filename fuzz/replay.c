/*
 * replay.c - replays a fuzz corpus through a fuzz target without
 * libFuzzer, so that `make check` (and SAN=1) runs every saved input.
 *
 *	test_fuzz_NAME [DIR|FILE...]
 *
 * Linked with fuzz/fuzz_NAME.c as $(B)/tests/test_fuzz_NAME.  Without
 * arguments it replays fuzz/corpus/NAME of the tree the binary was built
 * in: $SR_BUILD_DIR/../fuzz/corpus/NAME when scripts/run-tests exports
 * SR_BUILD_DIR, else the binary's directory/../../fuzz/corpus/NAME.
 *
 * Each input runs in a child process of its own, with the child's output
 * kept aside and shown only when it fails: the targets' code prints
 * messages a passing input should not spill into the test log, a crash
 * names its input, and the sanitizers' leak check runs per input.  A
 * child that exits non-zero, dies of a signal or runs over TIMEOUT_S
 * fails the corpus.  Prints one TAP line for the whole corpus.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz.h"

#define TIMEOUT_S 10		/* as `make fuzz` gives libFuzzer */
#define SHOWN_LINES 60		/* of a failing input's output */

struct tally {
	const char *name;	/* "fuzz_wire" */
	size_t inputs;
	size_t failed;
	char first[PATH_MAX];	/* the first input that failed */
};

/* The file's bytes in a block of exactly their size (so a read past the
 * end is caught); NULL with errno on failure. */
static uint8_t *
slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data = NULL;
	long n;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 &&
	    (data = malloc(n > 0 ? (size_t)n : 1)) != NULL) {
		*size = (size_t)n;
		if (fread(data, 1, *size, f) != *size) {
			free(data);
			data = NULL;
			errno = EIO;
		}
	}
	fclose(f);
	return data;
}

/* Copies the first SHOWN_LINES lines of out as TAP comments. */
static void
show(FILE *out)
{
	char line[1024];
	int n = 0;

	rewind(out);
	while (fgets(line, sizeof(line), out) != NULL && n++ < SHOWN_LINES)
		printf("#   %s%s", line, strchr(line, '\n') ? "" : "\n");
}

static void
failed(struct tally *t, const char *path, const char *what, FILE *out)
{
	printf("# %s: %s\n", path, what);
	if (out != NULL)
		show(out);
	if (t->failed++ == 0)
		snprintf(t->first, sizeof(t->first), "%s", path);
}

/* Runs one input in a child; its stdout and stderr go to a temp file. */
static void
replay_file(struct tally *t, const char *path)
{
	FILE *out = tmpfile();
	char what[128];
	uint8_t *data;
	size_t size = 0;
	pid_t pid;
	int status;

	t->inputs++;
	if (out == NULL) {
		failed(t, path, "cannot create a temporary file", NULL);
		return;
	}
	fflush(stdout);
	if ((pid = fork()) < 0) {
		snprintf(what, sizeof(what), "fork: %s", strerror(errno));
		failed(t, path, what, NULL);
		fclose(out);
		return;
	}
	if (pid == 0) {
		dup2(fileno(out), STDOUT_FILENO);
		dup2(fileno(out), STDERR_FILENO);
		alarm(TIMEOUT_S);
		if ((data = slurp(path, &size)) == NULL) {
			fprintf(stderr, "cannot read: %s\n", strerror(errno));
			exit(2);
		}
		LLVMFuzzerTestOneInput(data, size);
		free(data);
		/* exit, not _exit: the leak check runs at exit. */
		exit(0);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			status = -1;
			break;
		}
	if (status == -1)
		snprintf(what, sizeof(what), "waitpid: %s", strerror(errno));
	else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
		snprintf(what, sizeof(what), "timed out after %ds", TIMEOUT_S);
	else if (WIFSIGNALED(status))
		snprintf(what, sizeof(what), "killed by signal %d (%s)",
		    WTERMSIG(status), strsignal(WTERMSIG(status)));
	else if (WEXITSTATUS(status) != 0)
		snprintf(what, sizeof(what), "exited with status %d",
		    WEXITSTATUS(status));
	else
		what[0] = '\0';
	if (what[0] != '\0')
		failed(t, path, what, out);
	fclose(out);
}

static int
by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* A file, or every regular file of a directory in name order. */
static void
replay_path(struct tally *t, const char *path)
{
	struct dirent **entries;
	char file[PATH_MAX];
	struct stat st;
	int n;

	if (stat(path, &st) != 0) {
		t->inputs++;
		failed(t, path, strerror(errno), NULL);
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		replay_file(t, path);
		return;
	}
	if ((n = scandir(path, &entries, NULL, by_name)) < 0) {
		t->inputs++;
		failed(t, path, strerror(errno), NULL);
		return;
	}
	for (int i = 0; i < n; i++) {
		snprintf(file, sizeof(file), "%s/%s", path, entries[i]->d_name);
		if (entries[i]->d_name[0] != '.' && stat(file, &st) == 0 &&
		    S_ISREG(st.st_mode))
			replay_file(t, file);
		free(entries[i]);
	}
	free(entries);
}

/* fuzz/corpus/NAME of the source tree this binary was built in. */
static void
default_corpus(const char *argv0, const char *target, char *out,
    size_t size)
{
	const char *build = getenv("SR_BUILD_DIR"), *slash;

	if (build != NULL && build[0] != '\0') {
		snprintf(out, size, "%s/../fuzz/corpus/%s", build, target);
		return;
	}
	slash = strrchr(argv0, '/');
	snprintf(out, size, "%.*s/../../fuzz/corpus/%s",
	    slash != NULL ? (int)(slash - argv0) : 1,
	    slash != NULL ? argv0 : ".", target);
}

int
main(int argc, char **argv)
{
	struct tally t = { 0 };
	const char *base = strrchr(argv[0], '/');
	char corpus[PATH_MAX];

	base = base != NULL ? base + 1 : argv[0];
	/* test_fuzz_wire: target "fuzz_wire", corpus "wire". */
	t.name = strncmp(base, "test_", 5) == 0 ? base + 5 : base;
	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			replay_path(&t, argv[i]);
	} else {
		default_corpus(argv[0], strncmp(t.name, "fuzz_", 5) == 0 ?
		    t.name + 5 : t.name, corpus, sizeof(corpus));
		replay_path(&t, corpus);
	}
	if (t.inputs == 0)
		printf("not ok 1 - %s corpus: no inputs\n", t.name);
	else if (t.failed > 0)
		printf("not ok 1 - %s corpus (%zu inputs, %zu failed, the "
		    "first %s)\n", t.name, t.inputs, t.failed, t.first);
	else
		printf("ok 1 - %s corpus (%zu inputs)\n", t.name, t.inputs);
	printf("1..1\n");
	return t.inputs > 0 && t.failed == 0 ? 0 : 1;
}
