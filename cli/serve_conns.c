/*
 * serve_conns.c - `serve`'s request deadline (see serve_conns.h): a
 * doubly linked list of the open connections, each with the time its
 * current request began, walked by serve_http.c's main thread.
 */
#ifdef SR_HAVE_HTTP

#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "cli.h"
#include "serve_conns.h"

struct conn {
	struct conn *prev, *next;
	struct MHD_Connection *c;
	int64_t since;		/* when the current request's time began */
	bool busy;		/* a whole request is in */
	bool cut;		/* shut down already */
};

struct serve_conns {
	pthread_mutex_t lock;
	struct conn *head;
	int64_t timeout_ns;
};

struct serve_conns *
serve_conns_new(int64_t timeout_ns)
{
	struct serve_conns *g = calloc(1, sizeof(*g));

	if (g == NULL)
		return NULL;
	pthread_mutex_init(&g->lock, NULL);
	g->timeout_ns = timeout_ns;
	return g;
}

void
serve_conns_free(struct serve_conns *g)
{
	struct conn *k, *next;

	if (g == NULL)
		return;
	for (k = g->head; k != NULL; k = next) {
		next = k->next;
		free(k);
	}
	pthread_mutex_destroy(&g->lock);
	free(g);
}

void
serve_conns_notify(void *cls, struct MHD_Connection *c,
    void **socket_context, enum MHD_ConnectionNotificationCode toe)
{
	struct serve_conns *g = cls;
	struct conn *k = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		if ((k = calloc(1, sizeof(*k))) == NULL)
			return;
		k->c = c;
		k->since = sr_clock_ns();
		pthread_mutex_lock(&g->lock);
		k->next = g->head;
		if (g->head != NULL)
			g->head->prev = k;
		g->head = k;
		pthread_mutex_unlock(&g->lock);
		*socket_context = k;
		return;
	}
	if (k == NULL)
		return;
	pthread_mutex_lock(&g->lock);
	if (k->prev != NULL)
		k->prev->next = k->next;
	else
		g->head = k->next;
	if (k->next != NULL)
		k->next->prev = k->prev;
	pthread_mutex_unlock(&g->lock);
	free(k);
	*socket_context = NULL;
}

void
serve_conns_busy(struct serve_conns *g, struct MHD_Connection *c, bool busy)
{
	const union MHD_ConnectionInfo *info = MHD_get_connection_info(c,
	    MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn *k = info != NULL ? info->socket_context : NULL;

	if (k == NULL)
		return;
	pthread_mutex_lock(&g->lock);
	k->busy = busy;
	k->since = sr_clock_ns();
	pthread_mutex_unlock(&g->lock);
}

size_t
serve_conns_cut_late(struct serve_conns *g, int64_t now)
{
	size_t n = 0;

	pthread_mutex_lock(&g->lock);
	for (struct conn *k = g->head; k != NULL; k = k->next) {
		const union MHD_ConnectionInfo *info;

		if (k->busy || k->cut || now - k->since < g->timeout_ns)
			continue;
		info = MHD_get_connection_info(k->c,
		    MHD_CONNECTION_INFO_CONNECTION_FD);
		if (info == NULL)
			continue;
		shutdown(info->connect_fd, SHUT_RDWR);
		k->cut = true;
		n++;
	}
	pthread_mutex_unlock(&g->lock);
	return n;
}

#else

/* ISO C wants something in a translation unit. */
typedef int serve_conns_not_built;

#endif
