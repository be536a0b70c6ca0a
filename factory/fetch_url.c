/*
 * fetch_url.c - nf_fetch_url: download an http(s) url with libcurl into a
 * temp file in the cache, hashing on the fly; the sha256 pin is checked before
 * the blob becomes visible.  Bounded retries with exponential backoff on 5xx,
 * 429 (honouring Retry-After), 408 and connection errors; http/https only;
 * bounded redirects; TLS verification on; a size cap.
 */
#define _GNU_SOURCE
#include "factory/fetch.h"

#include <curl/curl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/version.h"
#include "util/banned.h"

#define SEED_HINT "seed it with: nimfactory cache add FILE"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

typedef struct download {
	nf_cache_writer *w;
	const nf_fetch_opts *o;
	int write_err;   /* an NF_E* from the writer */
	bool too_big;
	uint64_t offset; /* where this attempt resumed */
} download;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *user)
{
	download *d = user;
	size_t n;
	uint64_t total;

	if (!nf_size_mul(&n, size, nmemb))
		return 0;
	if (!nf_u64_add(&total, nf_cache_writer_size(d->w), n) || total > d->o->max_bytes) {
		d->too_big = true;
		return 0;
	}
	if ((d->write_err = nf_cache_writer_write(d->w, ptr, n)) < 0)
		return 0;
	return n;
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	download *d = user;
	(void)ultotal;
	(void)ulnow;
	if (d->o->progress)
		d->o->progress(d->o->progress_user, d->offset + (dlnow > 0 ? (uint64_t)dlnow : 0),
			       dltotal > 0 ? d->offset + (uint64_t)dltotal : 0);
	return 0;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0)
		;
}

static bool transient_curl_error(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_PARTIAL_FILE:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
		return true;
	default:
		return false;
	}
}

static bool transient_http_status(long status)
{
	return status == 408 || status == 429 || (status >= 500 && status <= 599);
}

static bool is_http_url(const char *url)
{
	return strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0;
}

/* Set the options that do not change between attempts. */
static int setup_handle(CURL *h, const char *url, download *d, char *errbuf)
{
	const nf_fetch_opts *o = d->o;
	CURLcode rc = CURLE_OK;

#define SET(opt, val)                                   \
	do {                                            \
		if (rc == CURLE_OK)                     \
			rc = curl_easy_setopt(h, opt, val); \
	} while (0)
	SET(CURLOPT_URL, url);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_FOLLOWLOCATION, 1L);
	SET(CURLOPT_MAXREDIRS, o->max_redirects);
	SET(CURLOPT_CONNECTTIMEOUT, o->connect_timeout_s);
	SET(CURLOPT_LOW_SPEED_LIMIT, o->low_speed_bytes);
	SET(CURLOPT_LOW_SPEED_TIME, o->low_speed_time_s);
	SET(CURLOPT_FAILONERROR, 1L);
	SET(CURLOPT_SSL_VERIFYPEER, 1L);
	SET(CURLOPT_SSL_VERIFYHOST, 2L);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_USERAGENT, "nimfactory/" NF_VERSION);
	SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)(o->max_bytes > INT64_MAX ? INT64_MAX
									     : (int64_t)o->max_bytes));
	SET(CURLOPT_WRITEFUNCTION, on_data);
	SET(CURLOPT_WRITEDATA, d);
	SET(CURLOPT_XFERINFOFUNCTION, on_progress);
	SET(CURLOPT_XFERINFODATA, d);
	SET(CURLOPT_NOPROGRESS, 0L);
	SET(CURLOPT_ERRORBUFFER, errbuf);
#undef SET
	if (rc != CURLE_OK)
		return nf_error_set(NF_EINTERNAL, "libcurl setup: %s", curl_easy_strerror(rc));
	return 0;
}

/* "url" or "url (mirror of original)" for messages. */
static char *describe(const char *url, const char *original)
{
	if (strcmp(url, original) == 0)
		return strdup(url);
	return nf_strdup_printf("%s (mirror of %s)", url, original);
}

/* The refusals before any work: a pin that is not a sha256, the network off. */
static int check_request(nf_cache *c, const char *url, const char *sha256, const nf_fetch_opts *o)
{
	if (!sha256 || !nf_sha256_is_hex(sha256))
		return nf_error_set(NF_EINPUT, "source %s: sha256 '%s' is not 64 lowercase hex digits",
				    url, sha256 ? sha256 : "(none)");
	if (o->offline)
		return nf_error_set(NF_ENET,
				    "source %s (sha256 %s) is not in the cache %s and the network is off; "
				    SEED_HINT, url, sha256, nf_cache_root(c));
	return 0;
}

/* A curl handle for real in *h (the caller cleans it up, also on error),
 * writing into a new cache writer d->w. */
static int open_transfer(CURL **h, download *d, nf_cache *c, const char *real, char *errbuf)
{
	int err;

	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return nf_error_set(NF_EENV, "libcurl: %s", curl_easy_strerror(curl_init_rc));
	*h = curl_easy_init();
	if (!*h)
		return nf_error_set(NF_ENOMEM, "libcurl: cannot make a handle");
	if ((err = nf_cache_writer_open(&d->w, c)) < 0)
		return err;
	return setup_handle(*h, real, d, errbuf);
}

/*
 * One transfer.  After a cut transfer it asks for the rest (Range): the
 * hash state goes on from the bytes already written.  A server that cannot
 * resume (!resumable) makes us start over.
 */
static int attempt_once(CURLcode *rc, long *status, CURL *h, download *d, bool resumable)
{
	int err;

	if (!resumable && nf_cache_writer_size(d->w) > 0 && (err = nf_cache_writer_reset(d->w)) < 0)
		return err;
	d->offset = nf_cache_writer_size(d->w);
	curl_easy_setopt(h, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)d->offset);
	*rc = curl_easy_perform(h);
	*status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	return 0;
}

/* Why an attempt failed, for the message, and whether another may do better. */
typedef struct attempt_failure {
	char reason[CURL_ERROR_SIZE + 64];
	bool again;
	curl_off_t retry_after; /* seconds the server asked for (429, 503), else 0 */
} attempt_failure;

/* The failed attempt (rc, status) read: the writer's error or a blob over
 * the size cap end the fetch (an error here); anything else fills *f, and a
 * server that cannot resume clears *resumable. */
static int explain_failure(attempt_failure *f, bool *resumable, CURL *h, const download *d,
			   CURLcode rc, long status, const char *errbuf, const char *what)
{
	memset(f, 0, sizeof(*f));
	if (d->write_err)
		return nf_error_wrap(d->write_err, "source %s", what);
	if (d->too_big || rc == CURLE_FILESIZE_EXCEEDED)
		return nf_error_set(NF_EINPUT, "source %s: larger than the limit of %llu bytes", what,
				    (unsigned long long)d->o->max_bytes);
	if (rc == CURLE_RANGE_ERROR || (rc == CURLE_HTTP_RETURNED_ERROR && status == 416)) {
		snprintf(f->reason, sizeof(f->reason), "the server cannot resume at byte %llu",
			 (unsigned long long)d->offset);
		*resumable = false;
		f->again = true;
	} else if (rc == CURLE_HTTP_RETURNED_ERROR || rc == CURLE_OK) {
		snprintf(f->reason, sizeof(f->reason), "HTTP %ld", status);
		f->again = transient_http_status(status);
		if (status == 429 || status == 503)
			curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &f->retry_after);
	} else {
		snprintf(f->reason, sizeof(f->reason), "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
		f->again = transient_curl_error(rc);
	}
	return 0;
}

/* The pause before the next attempt: the server's Retry-After where it
 * gave one, else *pause_ms (which doubles for the next); at most
 * o->max_backoff_ms either way. */
static unsigned next_pause(unsigned *pause_ms, curl_off_t retry_after, const nf_fetch_opts *o)
{
	unsigned ms = *pause_ms;

	if (retry_after > 0) {
		uint64_t ra = (uint64_t)retry_after * 1000u;
		ms = ra > o->max_backoff_ms ? o->max_backoff_ms : (unsigned)ra;
	}
	if (ms > o->max_backoff_ms)
		ms = o->max_backoff_ms;
	*pause_ms = *pause_ms > UINT_MAX / 2 ? UINT_MAX : *pause_ms * 2;
	return ms;
}

/* The names one fetch reports under. */
typedef struct fetch_names {
	const char *url, *sha256; /* as asked */
	const char *real;         /* after the mirror rules */
	const char *what;         /* real, or "real (mirror of url)" */
} fetch_names;

/* The last failure f, after attempt + 1 attempts, as the fetch's error. */
static int give_up(attempt_failure *f, unsigned attempt, const fetch_names *n, nf_cache *c)
{
	size_t used = strlen(f->reason);

	if (f->again)
		snprintf(f->reason + used, sizeof(f->reason) - used, " (after %u attempts)", attempt + 1);
	return nf_error_set(NF_ENET,
			    "source %s (sha256 %s) is not in the cache %s and the download from %s failed: %s; " SEED_HINT,
			    n->url, n->sha256, nf_cache_root(c), n->real, f->reason);
}

/* Attempts until one succeeds (the blob written, not yet committed), a
 * failure is not transient, or d->o->retries more are spent. */
static int download_retrying(CURL *h, download *d, char *errbuf, const fetch_names *n, nf_cache *c)
{
	unsigned pause_ms = d->o->backoff_ms;
	bool resumable = true;
	int err;

	for (unsigned attempt = 0;; attempt++) {
		attempt_failure f;
		CURLcode rc;
		long status;

		errbuf[0] = '\0';
		if ((err = attempt_once(&rc, &status, h, d, resumable)) < 0)
			return err;
		if (rc == CURLE_OK && status >= 200 && status < 300)
			return 0;
		if ((err = explain_failure(&f, &resumable, h, d, rc, status, errbuf, n->what)) < 0)
			return err;
		if (!f.again || attempt >= d->o->retries)
			return give_up(&f, attempt, n, c);
		sleep_ms(next_pause(&pause_ms, f.retry_after, d->o));
	}
}

int nf_fetch_url(char **out_path, nf_cache *c, const char *url, const char *sha256,
		 const nf_fetch_opts *o)
{
	nf_fetch_opts defaults;
	char errbuf[CURL_ERROR_SIZE];
	char *real = NULL, *what = NULL;
	download d = {0};
	fetch_names names = {url, sha256, NULL, NULL};
	CURL *h = NULL;
	int err;

	if (out_path)
		*out_path = NULL;
	if (!o) {
		nf_fetch_opts_init(&defaults);
		o = &defaults;
	}
	d.o = o;
	if ((err = check_request(c, url, sha256, o)) < 0 ||
	    (err = nf_fetch_rewrite_url(&real, url, o->mirrors)) < 0)
		return err;
	what = describe(real, url);
	if (!what) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	if (!is_http_url(real)) {
		err = nf_error_set(NF_EINPUT, "source %s: only http and https urls can be fetched",
				   what);
		goto done;
	}
	names.real = real;
	names.what = what;
	if ((err = open_transfer(&h, &d, c, real, errbuf)) < 0 ||
	    (err = download_retrying(h, &d, errbuf, &names, c)) < 0)
		goto done;
	err = nf_cache_writer_commit(NULL, out_path, d.w, sha256);
	d.w = NULL;
	if (err)
		nf_error_wrap(err, "source %s", what);
done:
	nf_cache_writer_abort(d.w);
	if (h)
		curl_easy_cleanup(h);
	free(real);
	free(what);
	return err;
}
