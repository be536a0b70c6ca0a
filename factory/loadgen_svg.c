/*
 * loadgen_svg.c - a sweep's latency against load as SVG: two panels side by
 * side, TTFT and TPOT, each with its p50 and p99 as lines over the loads
 * (evenly spaced in the order run, labelled with their values: sweeps are
 * usually geometric, 1,4,16).  Self-contained SVG 1.1 (no script, no
 * stylesheet, generic font), numbers written without the locale
 * (report_text.h), so the same figures give the same bytes.
 */
#include "factory/loadgen_report.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "factory/report_text.h"
#include "util/banned.h"

enum {
	SVG_W = 900,
	SVG_H = 400,
	PANEL_W = 380,   /* plot area of one panel */
	PANEL_H = 260,
	PANEL_T = 60,
	PANEL_L0 = 70,   /* left edge of the first panel's plot area */
	PANEL_GAP = 70,
	TICKS = 5,
};

typedef struct panel {
	const char *title;
	size_t summary; /* offset of the metric's summary in nf_lg_figures */
} panel;

static const panel panels[] = {
	{"time to first token (ms)", offsetof(nf_lg_figures, ttft_ms)},
	{"time per output token (ms)", offsetof(nf_lg_figures, tpot_ms)},
};

static const struct {
	const char *name, *colour, *dash;
} series[] = {{"p50", "#1f77b4", ""}, {"p99", "#d62728", " stroke-dasharray=\"6 3\""}};

static double value(const nf_lg_point *p, const panel *pn, int which)
{
	const nf_lg_summary *s = (const nf_lg_summary *)((const char *)&p->f + pn->summary);
	double v = which ? s->p99 : s->p50;
	return isfinite(v) && v > 0 ? v : 0;
}

/* A round step giving about TICKS intervals up to hi. */
static double tick_step(double hi)
{
	double raw = hi / TICKS, mag = pow(10, floor(log10(raw))), f = raw / mag;
	return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

static void num(FILE *o, double v, int decimals)
{
	char b[NF_REPORT_NUM_MAX];
	nf_report_num_fixed(b, v, decimals);
	fputs(b, o);
}

static double x_of(size_t i, size_t n, int left)
{
	return n < 2 ? left + PANEL_W / 2.0 : left + 20 + (PANEL_W - 40) * (double)i / (double)(n - 1);
}

static void axes(nf_report_text *t, const nf_lg_sweep *s, const panel *pn, int left, double top)
{
	double step = tick_step(top);
	int dec = step >= 1 ? 0 : step >= 0.1 ? 1 : step >= 0.01 ? 2 : 3;
	fprintf(t->f, "<text x=\"%d\" y=\"%d\" font-size=\"14\" text-anchor=\"middle\">", left + PANEL_W / 2,
		PANEL_T - 20);
	nf_report_text_xml(t, pn->title, 0);
	fprintf(t->f, "</text>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
		      "stroke=\"#888\"/>\n", left, PANEL_T, PANEL_W, PANEL_H);
	for (double v = 0; v <= top + step * 1e-9; v += step) {
		double y = PANEL_T + PANEL_H - PANEL_H * v / top;
		fprintf(t->f, "<line x1=\"%d\" x2=\"%d\" y1=\"", left, left + PANEL_W);
		num(t->f, y, 1);
		fputs("\" y2=\"", t->f);
		num(t->f, y, 1);
		fprintf(t->f, "\" stroke=\"#eee\"/>\n<text x=\"%d\" y=\"", left - 6);
		num(t->f, y + 4, 1);
		fputs("\" font-size=\"11\" text-anchor=\"end\">", t->f);
		num(t->f, v, dec);
		fputs("</text>\n", t->f);
	}
	for (size_t i = 0; i < s->n_points; i++) {
		fputs("<text x=\"", t->f);
		num(t->f, x_of(i, s->n_points, left), 1);
		fprintf(t->f, "\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">", PANEL_T + PANEL_H + 16);
		num(t->f, s->points[i].load, s->rate && s->points[i].load != floor(s->points[i].load) ? 2 : 0);
		fputs("</text>\n", t->f);
	}
	fprintf(t->f, "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">%s</text>\n",
		left + PANEL_W / 2, PANEL_T + PANEL_H + 36,
		s->rate ? "request rate (req/s)" : "concurrent clients");
}

static void line(nf_report_text *t, const nf_lg_sweep *s, const panel *pn, int which, int left,
		 double top)
{
	fprintf(t->f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"",
		series[which].colour, series[which].dash);
	for (size_t i = 0; i < s->n_points; i++) {
		fputs(i ? " " : "", t->f);
		num(t->f, x_of(i, s->n_points, left), 1);
		fputc(',', t->f);
		num(t->f, PANEL_T + PANEL_H - PANEL_H * value(&s->points[i], pn, which) / top, 1);
	}
	fputs("\"/>\n", t->f);
	for (size_t i = 0; i < s->n_points; i++) {
		double v = value(&s->points[i], pn, which);
		fputs("<circle cx=\"", t->f);
		num(t->f, x_of(i, s->n_points, left), 1);
		fputs("\" cy=\"", t->f);
		num(t->f, PANEL_T + PANEL_H - PANEL_H * v / top, 1);
		fprintf(t->f, "\" r=\"3.5\" fill=\"%s\"><title>%s ", series[which].colour, series[which].name);
		num(t->f, v, 2);
		fputs(" ms at ", t->f);
		num(t->f, s->points[i].load, 2);
		fputs("</title></circle>\n", t->f);
	}
}

static void draw_panel(nf_report_text *t, const nf_lg_sweep *s, const panel *pn, int left)
{
	double hi = 0, top;
	for (size_t i = 0; i < s->n_points; i++)
		for (int w = 0; w < 2; w++)
			hi = fmax(hi, value(&s->points[i], pn, w));
	top = hi > 0 ? ceil(hi * 1.05 / tick_step(hi * 1.05)) * tick_step(hi * 1.05) : 1;
	axes(t, s, pn, left, top);
	for (int w = 0; w < 2; w++)
		line(t, s, pn, w, left, top);
}

static void legend(nf_report_text *t)
{
	for (int w = 0; w < 2; w++) {
		int x = SVG_W / 2 - 60 + w * 80, y = SVG_H - 16;
		fprintf(t->f, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"%s/>\n",
			x, x + 24, y - 4, y - 4, series[w].colour, series[w].dash);
		fprintf(t->f, "<text x=\"%d\" y=\"%d\" font-size=\"12\">%s</text>\n", x + 30, y,
			series[w].name);
	}
}

int nf_lg_sweep_svg(char **out, const nf_lg_sweep *s)
{
	nf_report_text t;
	int err;
	if ((err = nf_report_text_open(&t)) < 0)
		return err;
	fprintf(t.f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		     "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
		     "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
		     "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n<title>",
		SVG_W, SVG_H, SVG_W, SVG_H, SVG_W, SVG_H);
	fputs("bench-serve: latency against load, ", t.f);
	nf_report_text_xml(&t, s->model, 0);
	fputs("</title>\n", t.f);
	for (size_t i = 0; i < sizeof panels / sizeof panels[0]; i++)
		draw_panel(&t, s, &panels[i], PANEL_L0 + (int)i * (PANEL_W + PANEL_GAP));
	legend(&t);
	fputs("</svg>\n", t.f);
	return nf_report_text_close(&t, out);
}
