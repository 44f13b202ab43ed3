/*
 * test_resolve.c - name resolution in the socket layer with a fake
 * resolver (sr_sock_getaddrinfo): addresses never reach it, a transient
 * failure (EAI_AGAIN) is retried until it answers, a name that does not
 * exist fails at once naming it, and neither a resolver that keeps
 * failing nor one that never answers outlives the deadline.  No traffic:
 * the fakes answer with 127.0.0.1 or not at all.
 */
#include <netdb.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "sock.h"
#include "clock.h"

static int calls;
static int transient_before_answer;
static int never_answer_fd = -1;

static int
answer_loopback(const char *service, const struct addrinfo *hints,
    struct addrinfo **res)
{
	struct addrinfo h = *hints;

	h.ai_flags |= AI_NUMERICHOST;
	return getaddrinfo("127.0.0.1", service, &h, res);
}

static int
fake_transient_then_answer(const char *node, const char *service,
    const struct addrinfo *hints, struct addrinfo **res)
{
	if (calls++ < transient_before_answer)
		return EAI_AGAIN;
	return answer_loopback(service, hints, res);
}

static int
fake_no_such_name(const char *node, const char *service,
    const struct addrinfo *hints, struct addrinfo **res)
{
	calls++;
	return EAI_NONAME;
}

static int
fake_always_transient(const char *node, const char *service,
    const struct addrinfo *hints, struct addrinfo **res)
{
	calls++;
	return EAI_AGAIN;
}

/* Blocks until the test closes the pipe's other end, as a resolver
 * whose name server never answers. */
static int
fake_never_answers(const char *node, const char *service,
    const struct addrinfo *hints, struct addrinfo **res)
{
	char c;

	calls++;
	while (read(never_answer_fd, &c, 1) > 0)
		;
	return EAI_NONAME;
}

static void
an_address_never_reaches_the_resolver(void)
{
	struct sr_sockaddr a;
	char why[256], shown[64];

	calls = 0;
	sr_sock_getaddrinfo = fake_no_such_name;
	CHECK(sr_sock_resolve_within("127.0.0.1", 4000, 0, sr_clock_ns(),
	    NULL, &a, why, sizeof(why)) == 0);
	sr_sock_format(&a, shown, sizeof(shown));
	CHECK(strcmp(shown, "127.0.0.1:4000") == 0);
	CHECK(sr_sock_resolve_within("[::1]", 4001, 0, sr_clock_ns(), NULL,
	    &a, why, sizeof(why)) == 0);
	sr_sock_format(&a, shown, sizeof(shown));
	CHECK(strcmp(shown, "[::1]:4001") == 0);
	CHECK(calls == 0);
	sr_sock_getaddrinfo = getaddrinfo;
}

static void
a_transient_failure_is_retried_until_the_name_resolves(void)
{
	struct sr_sockaddr a;
	char why[256] = "", shown[64];

	calls = 0;
	transient_before_answer = 2;
	sr_sock_getaddrinfo = fake_transient_then_answer;
	CHECKF(sr_sock_resolve_within("ring-host", 4000, 0, sr_clock_ns() +
	    30000000000LL, NULL, &a, why, sizeof(why)) == 0, "%s", why);
	CHECK(calls == 3);
	sr_sock_format(&a, shown, sizeof(shown));
	CHECK(strcmp(shown, "127.0.0.1:4000") == 0);
	sr_sock_getaddrinfo = getaddrinfo;
}

static void
a_name_that_does_not_exist_fails_at_once_naming_it(void)
{
	struct sr_sockaddr a;
	char why[256], want[256];

	calls = 0;
	sr_sock_getaddrinfo = fake_no_such_name;
	CHECK(sr_sock_resolve_within("no-such-host", 4000, 0, sr_clock_ns() +
	    30000000000LL, NULL, &a, why, sizeof(why)) == -1);
	CHECK(calls == 1);
	snprintf(want, sizeof(want), "cannot resolve 'no-such-host': %s",
	    gai_strerror(EAI_NONAME));
	CHECKF(strcmp(why, want) == 0, "%s", why);
	sr_sock_getaddrinfo = getaddrinfo;
}

static void
a_resolver_that_keeps_failing_stops_at_the_deadline(void)
{
	struct sr_sockaddr a;
	char why[256], want[256];
	int64_t start = sr_clock_ns();

	calls = 0;
	sr_sock_getaddrinfo = fake_always_transient;
	CHECK(sr_sock_resolve_within("flaky-host", 4000, 0, start +
	    500000000LL, NULL, &a, why, sizeof(why)) == -1);
	CHECK(sr_clock_ns() - start >= 500000000LL);
	/* 100, 200 ms of backoff fit in 500 ms: at least three attempts */
	CHECKF(calls >= 3, "%d calls", calls);
	snprintf(want, sizeof(want), "cannot resolve 'flaky-host': %s (tried "
	    "%d times in ", gai_strerror(EAI_AGAIN), calls);
	CHECKF(strncmp(why, want, strlen(want)) == 0, "%s", why);
	sr_sock_getaddrinfo = getaddrinfo;
}

static void
a_resolver_that_never_answers_cannot_outlive_the_deadline(void)
{
	struct sr_sockaddr a;
	char why[256];
	int fds[2];
	int64_t start = sr_clock_ns();
	volatile int cancel = 0;

	CHECK(pipe(fds) == 0);
	never_answer_fd = fds[0];
	calls = 0;
	sr_sock_getaddrinfo = fake_never_answers;
	CHECK(sr_sock_resolve_within("silent-host", 4000, 0, start +
	    300000000LL, NULL, &a, why, sizeof(why)) == -1);
	CHECK(sr_clock_ns() - start >= 300000000LL);
	CHECKF(strncmp(why, "cannot resolve 'silent-host': the resolver did "
	    "not answer within ", 64) == 0, "%s", why);
	/* a signal's cancel flag ends the wait too */
	cancel = 1;
	CHECK(sr_sock_resolve_within("silent-host", 4000, 0, sr_clock_ns() +
	    60000000000LL, &cancel, &a, why, sizeof(why)) == -1);
	CHECKF(strcmp(why, "interrupted while resolving 'silent-host'") == 0,
	    "%s", why);
	/* the helper threads end once their lookups do */
	close(fds[1]);
	sr_sock_getaddrinfo = getaddrinfo;
}

int
main(void)
{
	TEST_RUN(an_address_never_reaches_the_resolver);
	TEST_RUN(a_transient_failure_is_retried_until_the_name_resolves);
	TEST_RUN(a_name_that_does_not_exist_fails_at_once_naming_it);
	TEST_RUN(a_resolver_that_keeps_failing_stops_at_the_deadline);
	TEST_RUN(a_resolver_that_never_answers_cannot_outlive_the_deadline);
	return TEST_DONE();
}
