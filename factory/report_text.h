/*
 * report_text.h - what the report writers (report.c, report_md.c,
 * report_svg.c) share to write text: a growing string stream, XML escaping
 * into it, and numbers written without the C library's locale.
 *
 * Numbers: printf's %f and %g follow LC_NUMERIC (a German locale writes
 * "0,5"), which would make the same results give different bytes and an SVG
 * that no viewer reads.  These formatters print digits by integer arithmetic,
 * so "." is the decimal point whatever the locale.
 */
#ifndef NF_FACTORY_REPORT_TEXT_H
#define NF_FACTORY_REPORT_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct nf_report_text {
	FILE *f;   /* write with fputs/fputc; fprintf only for integers and strings */
	char *buf; /* owned until nf_report_text_close */
	size_t len;
	bool bad;  /* an allocation failed on the way: close reports NF_ENOMEM */
} nf_report_text;

int nf_report_text_open(nf_report_text *t);
/* Finish t: *out gets the text (caller frees) or NULL with NF_ENOMEM. */
int nf_report_text_close(nf_report_text *t, char **out);
/* Write s (NULL = "") escaped for XML text (attr 0) or an attribute (attr 1). */
void nf_report_text_xml(nf_report_text *t, const char *s, int attr);

/* Room for any number these write. */
#define NF_REPORT_NUM_MAX 64

/* v with exactly `decimals` digits after the point (0..9): "12.50", "-3".
 * Non-finite values are "NaN", "inf", "-inf"; |v| >= 1e15 (or too large for
 * the digits asked) is written in e-notation ("1.23e+18"). */
void nf_report_num_fixed(char buf[NF_REPORT_NUM_MAX], double v, int decimals);
/* v to `sig` significant digits (1..9) without trailing zeros: "30381",
 * "0.9987", "1", "0.00123"; e-notation below 1e-6 and from 1e15. */
void nf_report_num_sig(char buf[NF_REPORT_NUM_MAX], double v, int sig);

#endif
