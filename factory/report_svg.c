/*
 * report_svg.c - chart.svg: accuracy against decode speed, one point per
 * profile (see report.h), since people would rather look than read.
 *
 *   x  decode_tokens_per_s, from 0
 *   y  ppl_ratio (float32 = 1); where no profile has it, the first of
 *      top1_agreement, agreement_min, agreement that one has, so the axis
 *      means one thing for every point
 *   point area proportional to engine_mib; colour the profile's verdict;
 *   label its precision; a <title> per point for a viewer's tooltip
 *
 * Self-contained SVG 1.1: no script, no stylesheet, no external font or
 * image (font-family is the generic sans-serif).  Deterministic: the same
 * results give the same bytes (no time, numbers through report_text.h's
 * locale-free formatters, profiles in their order).  A profile without both
 * values is not plotted and is named in the legend.
 */
#include "factory/report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "factory/report_profiles.h"
#include "factory/report_text.h"
#include "util/error.h"
#include "util/banned.h"

/* Canvas and plot area, in SVG user units. */
enum {
	SVG_W = 780,
	SVG_H = 480,
	PLOT_L = 80,
	PLOT_R = 560,
	PLOT_T = 50,
	PLOT_B = 400,
	LEGEND_X = 590,
	TICKS = 5,        /* about this many tick intervals per axis */
	LEGEND_NAMES = 8, /* unplotted profiles named before "and N more" */
};

#define R_MAX 26.0  /* radius of the largest engine's point */
#define R_MIN 3.0   /* smallest radius, so a tiny engine stays visible */
#define R_NONE 6.0  /* radius when the engine's size was not measured */
#define LABEL_CHAR_W 7.0 /* a generous width of one 12px sans-serif character */

static const char *const x_metric = "decode_tokens_per_s";

typedef struct y_choice {
	const char *metric;
	const char *label;
} y_choice;

static const y_choice y_choices[] = {
	{"ppl_ratio", "perplexity ratio to float32 (1 = as good)"},
	{"top1_agreement", "top-1 agreement with float32"},
	{"agreement_min", "greedy agreement with float32 (lowest prompt)"},
	{"agreement", "greedy agreement with float32"},
};
#define N_Y (sizeof(y_choices) / sizeof(y_choices[0]))

typedef struct axis {
	double lo, hi, step;
	int decimals; /* of the tick labels */
} axis;

typedef struct point {
	const nf_gate_result *p;
	nf_verdict verdict;
	double x, y, mib; /* mib: NAN when not measured */
	double r;
} point;

/* What is drawn: the accuracy axis chosen, the points, the rest by name. */
typedef struct chart {
	const y_choice *y;                     /* NULL: no profile has an accuracy metric */
	point *pts;                            /* owned */
	size_t n_pts;
	const nf_report_profile **unplotted;   /* owned array, borrowed profiles */
	size_t n_unplotted;
} chart;

static const char *verdict_colour(nf_verdict v)
{
	return v == NF_VERDICT_PASSED ? "#2e7d32" : v == NF_VERDICT_FAILED ? "#c62828" : "#757575";
}

/* ---- writing ------------------------------------------------------------ */

static void put_num(nf_report_text *t, double v)
{
	char num[NF_REPORT_NUM_MAX];
	nf_report_num_fixed(num, v, 1);
	fputs(num, t->f);
}

/* name="v" with a leading space. */
static void put_attr(nf_report_text *t, const char *name, double v)
{
	fprintf(t->f, " %s=\"", name);
	put_num(t, v);
	fputc('"', t->f);
}

/* <text x y [extra]>text</text>; extra is trusted markup (attributes). */
static void put_text(nf_report_text *t, double x, double y, const char *extra, const char *text)
{
	fputs("<text", t->f);
	put_attr(t, "x", x);
	put_attr(t, "y", y);
	fprintf(t->f, "%s%s>", extra[0] ? " " : "", extra);
	nf_report_text_xml(t, text, 0);
	fputs("</text>\n", t->f);
}

static void put_line(nf_report_text *t, double x1, double y1, double x2, double y2, const char *style)
{
	fputs("<line", t->f);
	put_attr(t, "x1", x1);
	put_attr(t, "y1", y1);
	put_attr(t, "x2", x2);
	put_attr(t, "y2", y2);
	fprintf(t->f, " %s/>\n", style);
}

/* ---- scales ------------------------------------------------------------- */

/* 1, 2 or 5 times a power of ten, at least raw. */
static double nice_step(double raw)
{
	double p = pow(10.0, floor(log10(raw)));
	double f = raw / p;
	return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

/* An axis over [lo, hi] with round ticks; a single value gets room around it. */
static axis fit_axis(double lo, double hi)
{
	axis a;
	double span = hi - lo;
	if (!isfinite(span)) /* values near DBL_MAX: no scale fits them */
		return fit_axis(0, 1);
	if (!(span > 1e-12 * fmax(fabs(lo), fabs(hi)))) {
		double pad = fmax(fabs(hi) * 0.05, 0.01);
		lo = lo == 0 ? 0 : lo - pad;
		hi += pad;
		span = hi - lo;
	}
	a.step = nice_step(span / TICKS);
	a.lo = floor(lo / a.step) * a.step;
	a.hi = ceil(hi / a.step) * a.step;
	if (a.hi <= a.lo)
		a.hi = a.lo + a.step;
	a.decimals = a.step >= 1 ? 0 : (int)ceil(-log10(a.step) - 1e-9);
	return a;
}

static double px(const axis *a, double v)
{
	return PLOT_L + (v - a->lo) / (a->hi - a->lo) * (PLOT_R - PLOT_L);
}

static double py(const axis *a, double v)
{
	return PLOT_B - (v - a->lo) / (a->hi - a->lo) * (PLOT_B - PLOT_T);
}

/* ---- the data ----------------------------------------------------------- */

static const y_choice *choose_y(const nf_gate_results *rs)
{
	for (size_t i = 0; i < N_Y; i++) {
		const char *names[] = {y_choices[i].metric, NULL};
		if (nf_report_first_metric_present(rs, names))
			return &y_choices[i];
	}
	return NULL;
}

/* The finite value of metric name for p, or NAN. */
static double value_of(const nf_gate_results *rs, const nf_gate_result *p, const char *name)
{
	const nf_gate_metric *m = name ? nf_report_profile_metric(rs, p, name) : NULL;
	return m && isfinite(m->value) ? m->value : NAN;
}

/* Fill c with the plottable profiles (both values finite), largest point
 * first so that small ones are drawn on top; the others go to unplotted. */
static void collect(chart *c, const nf_gate_results *rs, const nf_report_profile *ps, size_t n)
{
	double mib_max = 0;
	c->n_pts = c->n_unplotted = 0;
	for (size_t i = 0; i < n; i++) {
		point q = {ps[i].first, ps[i].verdict, value_of(rs, ps[i].first, x_metric),
			   value_of(rs, ps[i].first, c->y ? c->y->metric : NULL),
			   value_of(rs, ps[i].first, "engine_mib"), R_NONE};
		if (isnan(q.x) || isnan(q.y)) {
			c->unplotted[c->n_unplotted++] = &ps[i];
			continue;
		}
		if (q.mib > mib_max)
			mib_max = q.mib;
		c->pts[c->n_pts++] = q;
	}
	for (size_t i = 0; i < c->n_pts; i++)
		if (c->pts[i].mib > 0 && mib_max > 0)
			c->pts[i].r = fmax(R_MIN, R_MAX * sqrt(c->pts[i].mib / mib_max));
	/* Insertion sort: stable, so equal points keep the profiles' order. */
	for (size_t i = 1; i < c->n_pts; i++) {
		point q = c->pts[i];
		size_t j = i;
		for (; j > 0 && c->pts[j - 1].r < q.r; j--)
			c->pts[j] = c->pts[j - 1];
		c->pts[j] = q;
	}
}

/* ---- drawing ------------------------------------------------------------ */

static void draw_axes(nf_report_text *t, const axis *ax, const axis *ay, const y_choice *y)
{
	const char *grid = "stroke=\"#e0e0e0\" stroke-width=\"1\"";
	char num[NF_REPORT_NUM_MAX];
	/* fit_axis makes about TICKS intervals; the bound only guards rounding. */
	int nx = (int)fmin(4 * TICKS, lround((ax->hi - ax->lo) / ax->step));
	int ny = (int)fmin(4 * TICKS, lround((ay->hi - ay->lo) / ay->step));

	for (int i = 0; i <= nx; i++) {
		double v = ax->lo + i * ax->step, x = px(ax, v);
		put_line(t, x, PLOT_T, x, PLOT_B, grid);
		put_line(t, x, PLOT_B, x, PLOT_B + 5, "stroke=\"#000\"");
		nf_report_num_fixed(num, v, ax->decimals);
		put_text(t, x, PLOT_B + 18, "text-anchor=\"middle\"", num);
	}
	for (int i = 0; i <= ny; i++) {
		double v = ay->lo + i * ay->step, yy = py(ay, v);
		put_line(t, PLOT_L, yy, PLOT_R, yy, grid);
		put_line(t, PLOT_L - 5, yy, PLOT_L, yy, "stroke=\"#000\"");
		nf_report_num_fixed(num, v, ay->decimals);
		put_text(t, PLOT_L - 8, yy + 4, "text-anchor=\"end\"", num);
	}
	fputs("<rect", t->f);
	put_attr(t, "x", PLOT_L);
	put_attr(t, "y", PLOT_T);
	put_attr(t, "width", PLOT_R - PLOT_L);
	put_attr(t, "height", PLOT_B - PLOT_T);
	fputs(" fill=\"none\" stroke=\"#000\"/>\n", t->f);
	put_text(t, (PLOT_L + PLOT_R) / 2.0, PLOT_B + 40, "text-anchor=\"middle\"", "decode tokens/s");
	fprintf(t->f, "<text transform=\"translate(20 %d) rotate(-90)\" text-anchor=\"middle\">",
		(PLOT_T + PLOT_B) / 2);
	nf_report_text_xml(t, y ? y->label : "accuracy", 0);
	fputs("</text>\n", t->f);
	/* Every accuracy metric here is 1 for an engine as good as float32. */
	if (y && ay->lo <= 1 && 1 <= ay->hi) {
		put_line(t, PLOT_L, py(ay, 1), PLOT_R, py(ay, 1), "stroke=\"#1565c0\" stroke-dasharray=\"6 4\"");
		put_text(t, PLOT_R - 4, py(ay, 1) - 4, "text-anchor=\"end\" fill=\"#1565c0\"", "float32");
	}
}

static void draw_point(nf_report_text *t, const point *q, const axis *ax, const axis *ay,
		       const y_choice *y)
{
	char x[NF_REPORT_NUM_MAX], v[NF_REPORT_NUM_MAX], mib[NF_REPORT_NUM_MAX];
	double cx = px(ax, q->x), cy = py(ay, q->y);

	nf_report_num_sig(x, q->x, 4);
	nf_report_num_sig(v, q->y, 4);
	nf_report_num_sig(mib, q->mib, 4);
	fputs("<g class=\"profile\"><title>", t->f);
	nf_report_text_xml(t, q->p->profile_name, 0);
	fprintf(t->f, ": %s tokens/s, %s %s, engine %s%s, %s</title>\n", x, y->metric, v,
		isnan(q->mib) ? "size not measured" : mib, isnan(q->mib) ? "" : " MiB",
		nf_verdict_name(q->verdict));
	fputs("<circle class=\"point\"", t->f);
	put_attr(t, "cx", cx);
	put_attr(t, "cy", cy);
	put_attr(t, "r", q->r);
	fprintf(t->f, " fill=\"%s\" fill-opacity=\"0.6\" stroke=\"%s\"/>\n", verdict_colour(q->verdict),
		verdict_colour(q->verdict));
	/* The label goes right of the point unless it would run into the
	 * legend; the width is estimated, as a self-contained SVG cannot
	 * measure its text. */
	if (cx + q->r + 3 + LABEL_CHAR_W * (double)strlen(q->p->precision) <= PLOT_R)
		put_text(t, cx + q->r + 3, cy + 4, "", q->p->precision);
	else
		put_text(t, cx - q->r - 3, cy + 4, "text-anchor=\"end\"", q->p->precision);
	fputs("</g>\n", t->f);
}

/* The verdict colours, from y; returns the y below them. */
static double legend_verdicts(nf_report_text *t, double y)
{
	static const nf_verdict verdicts[] = {NF_VERDICT_PASSED, NF_VERDICT_FAILED, NF_VERDICT_SKIPPED};
	put_text(t, LEGEND_X, y, "font-weight=\"bold\"", "verdict");
	for (size_t i = 0; i < sizeof(verdicts) / sizeof(verdicts[0]); i++) {
		y += 20;
		fputs("<circle", t->f);
		put_attr(t, "cx", LEGEND_X + 6);
		put_attr(t, "cy", y - 4);
		fprintf(t->f, " r=\"6\" fill=\"%s\" fill-opacity=\"0.6\" stroke=\"%s\"/>\n",
			verdict_colour(verdicts[i]), verdict_colour(verdicts[i]));
		put_text(t, LEGEND_X + 18, y, "", nf_verdict_name(verdicts[i]));
	}
	return y;
}

/* The size scale: the largest engine's circle and its MiB. */
static double legend_size(nf_report_text *t, double y, const point *pts, size_t n_pts)
{
	double mib_max = NAN, r_max = 0;
	char num[NF_REPORT_NUM_MAX], label[NF_REPORT_NUM_MAX + 8];

	for (size_t i = 0; i < n_pts; i++)
		if (!isnan(pts[i].mib) && pts[i].r >= r_max) {
			r_max = pts[i].r;
			mib_max = pts[i].mib;
		}
	put_text(t, LEGEND_X, y, "font-weight=\"bold\"", "area: engine size");
	if (isnan(mib_max)) {
		put_text(t, LEGEND_X, y + 20, "", "not measured");
		return y + 20;
	}
	fputs("<circle", t->f);
	put_attr(t, "cx", LEGEND_X + R_MAX);
	put_attr(t, "cy", y + 10 + r_max);
	put_attr(t, "r", r_max);
	fputs(" fill=\"none\" stroke=\"#000\"/>\n", t->f);
	nf_report_num_sig(num, mib_max, 4);
	snprintf(label, sizeof(label), "%s MiB", num);
	put_text(t, LEGEND_X + 2 * R_MAX + 8, y + 14 + r_max, "", label);
	return y + 20 + 2 * r_max;
}

/* The profiles not plotted, by name. */
static void legend_unplotted(nf_report_text *t, double y, const chart *c)
{
	if (c->n_unplotted == 0)
		return;
	put_text(t, LEGEND_X, y, "font-weight=\"bold\"", "not plotted");
	for (size_t i = 0; i < c->n_unplotted && i < LEGEND_NAMES; i++)
		put_text(t, LEGEND_X, y += 16, "", c->unplotted[i]->first->profile_name);
	if (c->n_unplotted > LEGEND_NAMES) {
		char more[48];
		snprintf(more, sizeof(more), "and %zu more", c->n_unplotted - LEGEND_NAMES);
		put_text(t, LEGEND_X, y + 16, "", more);
	}
}

static void draw_legend(nf_report_text *t, const chart *c)
{
	double y = legend_verdicts(t, PLOT_T + 4);
	y = legend_size(t, y + 36, c->pts, c->n_pts);
	legend_unplotted(t, y + 30, c);
}

/* The axes' ranges: x from 0 to the fastest, y over the values and 1. */
static void fit_axes(axis *ax, axis *ay, const point *pts, size_t n)
{
	double xmax = 0, ylo = 1, yhi = 1;
	if (n == 0) {
		*ax = fit_axis(0, 1);
		*ay = fit_axis(0.9, 1.1);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		xmax = fmax(xmax, pts[i].x);
		ylo = fmin(ylo, pts[i].y);
		yhi = fmax(yhi, pts[i].y);
	}
	*ax = fit_axis(fmin(0, xmax), xmax * 1.05);
	*ay = fit_axis(ylo - (yhi - ylo) * 0.05, yhi + (yhi - ylo) * 0.05);
}

static void draw(nf_report_text *t, const chart *c, const nf_report_meta *meta)
{
	const y_choice *y = c->y;
	axis ax, ay;
	char title[256];

	fit_axes(&ax, &ay, c->pts, c->n_pts);
	fprintf(t->f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
		      "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
		SVG_W, SVG_H, SVG_W, SVG_H);
	snprintf(title, sizeof(title), "%s: accuracy against decode speed",
		 meta && meta->model ? meta->model : "gates");
	fputs("<title>", t->f);
	nf_report_text_xml(t, title, 0);
	fputs("</title>\n", t->f);
	fprintf(t->f, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", SVG_W, SVG_H);
	put_text(t, PLOT_L, 30, "font-size=\"16\" font-weight=\"bold\"", title);
	draw_axes(t, &ax, &ay, y);
	for (size_t i = 0; i < c->n_pts; i++)
		draw_point(t, &c->pts[i], &ax, &ay, y);
	if (c->n_pts == 0)
		put_text(t, (PLOT_L + PLOT_R) / 2.0, (PLOT_T + PLOT_B) / 2.0, "text-anchor=\"middle\"",
			 y ? "no profile has both this accuracy and a decode speed"
			   : "no profile has an accuracy metric");
	draw_legend(t, c);
	fputs("</svg>\n", t->f);
}

int nf_report_svg(char **out, const nf_gate_results *rs, const nf_report_meta *meta)
{
	nf_report_text t;
	nf_report_profile *ps = NULL;
	chart c = {.y = choose_y(rs)};
	size_t n = 0;
	int rc;

	*out = NULL;
	if ((rc = nf_report_profiles(&ps, &n, rs)) < 0)
		return rc;
	c.pts = calloc(n ? n : 1, sizeof(*c.pts));
	c.unplotted = calloc(n ? n : 1, sizeof(*c.unplotted));
	if (!c.pts || !c.unplotted) {
		rc = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	collect(&c, rs, ps, n);
	if ((rc = nf_report_text_open(&t)) < 0)
		goto done;
	draw(&t, &c, meta);
	rc = nf_report_text_close(&t, out);
done:
	free(ps);
	free(c.pts);
	free(c.unplotted);
	return rc;
}
