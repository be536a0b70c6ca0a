/* test_report_text.c - the report writers' locale-free numbers and their string stream. */
#define _GNU_SOURCE
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "factory/report_text.h"
#include "tests/tap.h"

static void fixed_is(double v, int decimals, const char *want)
{
	char buf[NF_REPORT_NUM_MAX];
	nf_report_num_fixed(buf, v, decimals);
	is_str(buf, want, "fixed(%.17g, %d)", v, decimals);
}

static void sig_is(double v, int sig, const char *want)
{
	char buf[NF_REPORT_NUM_MAX];
	nf_report_num_sig(buf, v, sig);
	is_str(buf, want, "sig(%.17g, %d)", v, sig);
}

static void test_numbers(void)
{
	fixed_is(0.5, 1, "0.5");
	fixed_is(12.25, 3, "12.250");
	fixed_is(2.5, 0, "3"); /* llround: halves away from zero */
	fixed_is(-1.25, 1, "-1.3");
	fixed_is(-0.0004, 2, "0.00"); /* never "-0.00" */
	fixed_is(-0.0, 0, "0");
	fixed_is(123456789.0, 0, "123456789");
	fixed_is(0.123456789123, 12, "0.123456789"); /* decimals capped at 9 */
	fixed_is(1e16, 1, "1.00e+16");
	fixed_is(-2.5e300, 2, "-2.50e+300");
	fixed_is(9.9999e20, 1, "1.00e+21"); /* mantissa rounding carries into the exponent */
	fixed_is(NAN, 1, "NaN");
	fixed_is(INFINITY, 1, "inf");
	fixed_is(-INFINITY, 3, "-inf");
	sig_is(30381.4596, 4, "30381");
	sig_is(0.998712, 4, "0.9987");
	sig_is(1.0, 4, "1");
	sig_is(0.0, 4, "0");
	sig_is(70.5, 4, "70.5");
	sig_is(9.99996, 4, "10");
	sig_is(0.00123456, 3, "0.00123");
	sig_is(1.5e-7, 3, "1.5e-07");
	sig_is(-4.25e17, 2, "-4.3e+17");
	sig_is(NAN, 4, "NaN");
}

/* A locale whose decimal point is a comma must not reach the reports. */
static void test_locale(void)
{
	static const char *const commas[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"};
	const char *got = NULL;
	for (size_t i = 0; !got && i < sizeof(commas) / sizeof(commas[0]); i++)
		got = setlocale(LC_NUMERIC, commas[i]);
	if (!got) {
		skip("no locale with a decimal comma installed");
		return;
	}
	char buf[NF_REPORT_NUM_MAX];
	nf_report_num_fixed(buf, 0.5, 2);
	is_str(buf, "0.50", "fixed: '.' under %s", got);
	nf_report_num_sig(buf, 1.5e-7, 2);
	is_str(buf, "1.5e-07", "sig: '.' under %s", got);
	setlocale(LC_NUMERIC, "C");
}

static void test_stream(void)
{
	nf_report_text t;
	char *out = NULL;
	is_int(nf_report_text_open(&t), 0, "stream opens");
	fputs("<a b=\"", t.f);
	nf_report_text_xml(&t, "x\"<&>\ny", 1);
	fputs("\">", t.f);
	nf_report_text_xml(&t, "<&>\n", 0);
	nf_report_text_xml(&t, NULL, 0);
	fputs("</a>", t.f);
	is_int(nf_report_text_close(&t, &out), 0, "stream closes");
	is_str(out, "<a b=\"x&quot;&lt;&amp;&gt;&#10;y\">&lt;&amp;&gt;\n</a>", "XML escaping into the stream");
	free(out);
	is_int(nf_report_text_open(&t), 0, "stream opens again");
	t.bad = true; /* as after a failed allocation */
	ok(nf_report_text_close(&t, &out) < 0 && out == NULL, "a failed write is an error, not a short report");
}

int main(void)
{
	test_numbers();
	test_locale();
	test_stream();
	return done_testing();
}
