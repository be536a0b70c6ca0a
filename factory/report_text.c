/* report_text.c - the report writers' string stream and locale-free numbers (see report_text.h). */
#include "factory/report_text.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "factory/escape.h"
#include "util/error.h"
#include "util/banned.h"

int nf_report_text_open(nf_report_text *t)
{
	memset(t, 0, sizeof(*t));
	t->f = open_memstream(&t->buf, &t->len);
	return t->f ? 0 : nf_error_set(NF_ENOMEM, "out of memory for a report");
}

int nf_report_text_close(nf_report_text *t, char **out)
{
	*out = NULL;
	if (fclose(t->f) != 0 || t->bad || !t->buf) {
		free(t->buf);
		t->buf = NULL;
		return nf_error_set(NF_ENOMEM, "out of memory writing a report");
	}
	*out = t->buf;
	t->buf = NULL;
	return 0;
}

void nf_report_text_xml(nf_report_text *t, const char *s, int attr)
{
	char *e = nf_escape_xml(s ? s : "", attr);
	if (!e) {
		t->bad = true;
		return;
	}
	fputs(e, t->f);
	free(e);
}

static const long long pow10_ll[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
				     100000000, 1000000000};

static bool nonfinite(char buf[NF_REPORT_NUM_MAX], double v)
{
	if (isnan(v))
		snprintf(buf, NF_REPORT_NUM_MAX, "NaN");
	else if (isinf(v))
		snprintf(buf, NF_REPORT_NUM_MAX, "%s", v < 0 ? "-inf" : "inf");
	return !isfinite(v);
}

/* The digits of a value already scaled by 10^decimals and rounded. */
static void scaled_digits(char *buf, size_t size, long long q, int decimals)
{
	const char *sign = q < 0 ? "-" : "";
	unsigned long long u = q < 0 ? 0ULL - (unsigned long long)q : (unsigned long long)q;
	unsigned long long p = (unsigned long long)pow10_ll[decimals];
	if (decimals == 0)
		snprintf(buf, size, "%s%llu", sign, u);
	else
		snprintf(buf, size, "%s%llu.%0*llu", sign, u / p, decimals, u % p);
}

/* m.mm...e+XX with `decimals` digits of mantissa fraction. */
static void exponent_form(char buf[NF_REPORT_NUM_MAX], double v, int decimals)
{
	int e = (int)floor(log10(fabs(v)));
	double m = v / pow(10.0, e);
	long long q = llround(m * (double)pow10_ll[decimals]);
	char mant[48];
	/* 9.996 rounds to 10.00: carry into the exponent. */
	if (llabs(q) >= 10 * pow10_ll[decimals]) {
		e++;
		q = llround(v / pow(10.0, e) * (double)pow10_ll[decimals]);
	}
	scaled_digits(mant, sizeof(mant), q, decimals);
	snprintf(buf, NF_REPORT_NUM_MAX, "%se%c%02d", mant, e < 0 ? '-' : '+', abs(e));
}

static int clamp_int(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

void nf_report_num_fixed(char buf[NF_REPORT_NUM_MAX], double v, int decimals)
{
	decimals = clamp_int(decimals, 0, 9);
	if (nonfinite(buf, v))
		return;
	double scaled = v * (double)pow10_ll[decimals];
	/* long long holds 9.2e18; stay well inside so rounding cannot overflow. */
	if (fabs(v) >= 1e15 || fabs(scaled) >= 9e18) {
		exponent_form(buf, v, 2);
		return;
	}
	long long q = llround(scaled);
	if (q == 0) /* no "-0.00" */
		q = 0;
	scaled_digits(buf, NF_REPORT_NUM_MAX, q, decimals);
}

static void trim_zeros(char *s)
{
	char *e = strchr(s, 'e');
	char tail[NF_REPORT_NUM_MAX] = "";
	if (!strchr(s, '.'))
		return;
	if (e) {
		snprintf(tail, sizeof(tail), "%s", e);
		*e = '\0';
	}
	size_t n = strlen(s);
	while (n > 0 && s[n - 1] == '0')
		s[--n] = '\0';
	if (n > 0 && s[n - 1] == '.')
		s[--n] = '\0';
	memcpy(s + n, tail, strlen(tail) + 1);
}

void nf_report_num_sig(char buf[NF_REPORT_NUM_MAX], double v, int sig)
{
	sig = clamp_int(sig, 1, 9);
	if (nonfinite(buf, v))
		return;
	if (v == 0) {
		snprintf(buf, NF_REPORT_NUM_MAX, "0");
		return;
	}
	int e = (int)floor(log10(fabs(v)));
	if (e < -6 || e >= 15)
		exponent_form(buf, v, sig - 1);
	else
		nf_report_num_fixed(buf, v, clamp_int(sig - 1 - e, 0, 9));
	trim_zeros(buf);
}
