/*
 * error.c - the error object: the table of codes and phases, filling and
 * formatting.  Nothing here prints; the caller decides where a message goes.
 */
#include <stdio.h>
#include <string.h>

#include "error.h"

static const struct {
	const char *slug;
	const char *text;
} codes[] = {
#define SR_CODE_ROW(name, slug, text) { slug, text },
	SR_ERRNO_MAP(SR_CODE_ROW)
#undef SR_CODE_ROW
};

static const char *const phases[] = {
#define SR_PHASE_ROW(name, slug) slug,
	SR_PHASE_MAP(SR_PHASE_ROW)
#undef SR_PHASE_ROW
};

void
sr_error_clear(struct sr_error *err)
{
	memset(err, 0, sizeof(*err));
	err->code = SR_EOK;
	err->phase = SR_PHASE_NONE;
	err->rank = -1;
	err->peer = -1;
	err->origin = -1;
	err->step = -1;
}

const char *
sr_code_name(enum sr_code code)
{
	return (unsigned)code < SR_CODE_COUNT ? codes[code].slug : "unknown";
}

const char *
sr_code_text(enum sr_code code)
{
	return (unsigned)code < SR_CODE_COUNT ? codes[code].text : "unknown error";
}

const char *
sr_phase_name(enum sr_phase phase)
{
	return (unsigned)phase < SR_PHASE_COUNT ? phases[phase] : "unknown";
}

int
sr_error_set(struct sr_error *err, enum sr_code code, enum sr_phase phase,
    const char *fmt, ...)
{
	va_list ap;

	if (err == NULL)
		return -1;
	err->code = code;
	err->phase = phase;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return -1;
}

void
sr_err_peer(struct sr_error *err, int64_t peer, const char *address)
{
	if (err == NULL || err->peer >= 0)
		return;
	err->peer = peer;
	if (address != NULL)
		snprintf(err->peer_address, sizeof(err->peer_address), "%s",
		    address);
}

char *
sr_error_format(const struct sr_error *err, char *buf, size_t size)
{
	const char *message = err->message[0] ? err->message :
	    sr_code_text(err->code);

	if (size == 0)
		return buf;
	if (err->rank >= 0)
		snprintf(buf, size, "rank %lld: %s", (long long)err->rank,
		    message);
	else
		snprintf(buf, size, "%s", message);
	return buf;
}
