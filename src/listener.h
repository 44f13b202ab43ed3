/*
 * listener.h - the listener's layout, shared by listener.c and ring.c.
 */
#ifndef SR_LISTENER_H
#define SR_LISTENER_H

#include "silvic_ring.h"

struct sr_listener {
	int fd;
	uint16_t port;
	char address[SR_ADDR_MAX];
	/* The rank's other addresses' sockets (sr_listener_also). */
	int also[SR_RING_STREAMS_MAX - 1];
	int nalso;
};

#endif
