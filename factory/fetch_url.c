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

int nf_fetch_url(char **out_path, nf_cache *c, const char *url, const char *sha256,
		 const nf_fetch_opts *o)
{
	nf_fetch_opts defaults;
	char errbuf[CURL_ERROR_SIZE];
	char *real = NULL, *what = NULL;
	char reason[CURL_ERROR_SIZE + 64];
	download d = {0};
	CURL *h = NULL;
	int err = 0;
	unsigned pause_ms;
	bool resumable = true;

	if (out_path)
		*out_path = NULL;
	if (!o) {
		nf_fetch_opts_init(&defaults);
		o = &defaults;
	}
	d.o = o;
	if (!sha256 || !nf_sha256_is_hex(sha256))
		return nf_error_set(NF_EINPUT, "source %s: sha256 '%s' is not 64 lowercase hex digits",
				    url, sha256 ? sha256 : "(none)");
	if (o->offline)
		return nf_error_set(NF_ENET,
				    "source %s (sha256 %s) is not in the cache %s and the network is off; "
				    SEED_HINT, url, sha256, nf_cache_root(c));
	if ((err = nf_fetch_rewrite_url(&real, url, o->mirrors)) < 0)
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
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK) {
		err = nf_error_set(NF_EENV, "libcurl: %s", curl_easy_strerror(curl_init_rc));
		goto done;
	}
	h = curl_easy_init();
	if (!h) {
		err = nf_error_set(NF_ENOMEM, "libcurl: cannot make a handle");
		goto done;
	}
	if ((err = nf_cache_writer_open(&d.w, c)) < 0)
		goto done;
	if ((err = setup_handle(h, real, &d, errbuf)) < 0)
		goto done;

	pause_ms = o->backoff_ms;
	for (unsigned attempt = 0;; attempt++) {
		CURLcode rc;
		long status = 0;
		curl_off_t retry_after = 0;
		bool again = false;

		errbuf[0] = '\0';
		/*
		 * After a cut transfer, ask for the rest (Range): the hash state
		 * goes on from the bytes already written.  A server that cannot
		 * resume makes us start over.
		 */
		if (!resumable && nf_cache_writer_size(d.w) > 0 &&
		    (err = nf_cache_writer_reset(d.w)) < 0)
			goto done;
		d.offset = nf_cache_writer_size(d.w);
		curl_easy_setopt(h, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)d.offset);
		rc = curl_easy_perform(h);
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		if (rc == CURLE_OK && status >= 200 && status < 300)
			break;
		if (d.write_err) {
			err = nf_error_wrap(d.write_err, "source %s", what);
			goto done;
		}
		if (d.too_big || rc == CURLE_FILESIZE_EXCEEDED) {
			err = nf_error_set(NF_EINPUT, "source %s: larger than the limit of %llu bytes",
					   what, (unsigned long long)o->max_bytes);
			goto done;
		}
		if (rc == CURLE_RANGE_ERROR || (rc == CURLE_HTTP_RETURNED_ERROR && status == 416)) {
			snprintf(reason, sizeof(reason), "the server cannot resume at byte %llu",
				 (unsigned long long)d.offset);
			resumable = false;
			again = true;
		} else if (rc == CURLE_HTTP_RETURNED_ERROR || rc == CURLE_OK) {
			snprintf(reason, sizeof(reason), "HTTP %ld", status);
			again = transient_http_status(status);
			if (status == 429 || status == 503)
				curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &retry_after);
		} else {
			snprintf(reason, sizeof(reason), "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
			again = transient_curl_error(rc);
		}
		if (!again || attempt >= o->retries) {
			if (again)
				snprintf(reason + strlen(reason), sizeof(reason) - strlen(reason),
					 " (after %u attempts)", attempt + 1);
			err = nf_error_set(NF_ENET,
					   "source %s (sha256 %s) is not in the cache %s and the download from %s failed: %s; " SEED_HINT,
					   url, sha256, nf_cache_root(c), real, reason);
			goto done;
		}
		{
			unsigned ms = pause_ms;
			if (retry_after > 0) {
				uint64_t ra = (uint64_t)retry_after * 1000u;
				ms = ra > o->max_backoff_ms ? o->max_backoff_ms : (unsigned)ra;
			}
			if (ms > o->max_backoff_ms)
				ms = o->max_backoff_ms;
			sleep_ms(ms);
			pause_ms = pause_ms > UINT_MAX / 2 ? UINT_MAX : pause_ms * 2;
		}
	}
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
