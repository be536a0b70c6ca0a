/* error.c - per-thread last-error message (see error.h). */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/banned.h"

#define NF_ERROR_MAX 1024

static _Thread_local char last_message[NF_ERROR_MAX];
static _Thread_local int last_code;

int nf_error_set(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_message, sizeof(last_message), fmt, ap);
	va_end(ap);
	last_code = code;
	return code;
}

int nf_error_wrap(int code, const char *fmt, ...)
{
	char prefix[NF_ERROR_MAX];
	char previous[NF_ERROR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(previous, last_message, sizeof(previous));
	/* Truncation of very long chains is acceptable: keep the newest context. */
	size_t n = strlen(prefix);
	if (n >= sizeof(last_message))
		n = sizeof(last_message) - 1;
	memcpy(last_message, prefix, n);
	if (previous[0] && n + 2 < sizeof(last_message)) {
		size_t room = sizeof(last_message) - n - 3, m = strlen(previous);
		memcpy(last_message + n, ": ", 2);
		if (m > room)
			m = room;
		memcpy(last_message + n + 2, previous, m);
		n += 2 + m;
	}
	last_message[n] = '\0';
	last_code = code;
	return code;
}

const char *nf_error_last(void) { return last_message; }

int nf_error_last_code(void) { return last_code; }

void nf_error_clear(void)
{
	last_message[0] = '\0';
	last_code = NF_OK;
}

int nf_error_exit_status(int code)
{
	switch (code) {
	case NF_OK: return NF_EXIT_OK;
	case NF_EINPUT:
	case NF_ENOTFOUND:
	case NF_EUNSUPPORTED: return NF_EXIT_INPUT;
	case NF_EGATE: return NF_EXIT_GATE;
	case NF_EENV:
	case NF_ENOMEM:
	case NF_EIO:
	case NF_ENET: return NF_EXIT_ENV;
	default: return NF_EXIT_INTERNAL;
	}
}

const char *nf_error_name(int code)
{
	switch (code) {
	case NF_OK: return "ok";
	case NF_EINPUT: return "input";
	case NF_EGATE: return "gate";
	case NF_EENV: return "environment";
	case NF_ENOMEM: return "memory";
	case NF_EIO: return "io";
	case NF_ENOTFOUND: return "not-found";
	case NF_ENET: return "network";
	case NF_EUNSUPPORTED: return "unsupported";
	default: return "internal";
	}
}
