/*
 * roofline_occupancy.c - the static occupancy of a GEMV kernel, read from the
 * kernels' table in docs/cuda-kernels.md (written from `ptxas -v` by
 * tests/e2e/cuda_static.sh) for the roofline model (roofline.h).  The
 * tables there are markdown tables whose header names a "kernel" and an
 * "occupancy" column among others, one per architecture under a heading
 * naming it ("### sm_90a"); an "arch" column, when a table has one, names
 * each row's instead.
 */
#include "engine/roofline.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/fs.h"
#include "util/parse.h"
#include "util/banned.h"

#define DOC_MAX_BYTES (1u << 20)
#define MAX_COLUMNS 16
#define CELL_MAX 96

/* The cells of a markdown table row "| a | b |" (trimmed, lowercased); the
 * count, or -1 when the line is not a table row. */
static int split_row(char cells[MAX_COLUMNS][CELL_MAX], const char *line, size_t len)
{
	size_t i = 0;
	int n = 0;
	while (i < len && isspace((unsigned char)line[i]))
		i++;
	if (i == len || line[i] != '|')
		return -1;
	i++;
	while (i < len && n < MAX_COLUMNS) {
		size_t start = i, end, w = 0;
		while (i < len && line[i] != '|')
			i++;
		if (i == len)
			break; /* text after the last '|' is no cell */
		end = i++;
		while (start < end && isspace((unsigned char)line[start]))
			start++;
		while (end > start && isspace((unsigned char)line[end - 1]))
			end--;
		for (size_t k = start; k < end && w + 1 < CELL_MAX; k++)
			if (line[k] != '`')
				cells[n][w++] = (char)tolower((unsigned char)line[k]);
		cells[n++][w] = '\0';
	}
	return n;
}

typedef struct columns {
	int kernel, arch, occupancy; /* arch -1: the table's heading names it */
} columns;

static int find_columns(columns *c, char cells[MAX_COLUMNS][CELL_MAX], int n)
{
	c->kernel = c->arch = c->occupancy = -1;
	for (int i = 0; i < n; i++) {
		if (c->kernel < 0 && strstr(cells[i], "kernel"))
			c->kernel = i;
		else if (c->arch < 0 && strstr(cells[i], "arch"))
			c->arch = i;
		else if (c->occupancy < 0 && strstr(cells[i], "occupancy"))
			c->occupancy = i;
	}
	return c->kernel >= 0 && c->occupancy >= 0;
}

/* "62.5%" -> 0.625, "0.625" -> 0.625. */
static int parse_occupancy(double *out, const char *cell, const char *path)
{
	char num[CELL_MAX];
	size_t n = strcspn(cell, "% ");
	int percent = cell[n] == '%';
	double v;
	if (n == 0 || n >= sizeof num)
		return nf_error_set(NF_EINPUT, "%s: occupancy '%s' is not a number", path, cell);
	memcpy(num, cell, n);
	num[n] = '\0';
	if (nf_parse_double(&v, num, 0, percent ? 100 : 1, "occupancy"))
		return nf_error_wrap(NF_EINPUT, "%s", path);
	*out = percent ? v / 100 : v;
	if (*out <= 0)
		return nf_error_set(NF_EINPUT, "%s: occupancy '%s' is zero", path, cell);
	return 0;
}

/* "sm_90a" is for sm_90, "sm_9" is not. */
static int arch_matches(const char *cell, const char *arch)
{
	size_t n = strlen(arch);
	return strncmp(cell, arch, n) == 0 && !isdigit((unsigned char)cell[n]);
}

/* A markdown heading's architecture ("### sm_90a" -> "sm_90a"), or "". */
static void heading_arch(char *out, size_t len, const char *line, size_t n)
{
	const char *sm = NULL;
	size_t w = 0;
	for (size_t i = 0; i + 3 <= n && !sm; i++)
		if (!strncmp(line + i, "sm_", 3))
			sm = line + i;
	out[0] = '\0';
	while (sm && sm < line + n && w + 1 < len && (isalnum((unsigned char)*sm) || *sm == '_'))
		out[w++] = *sm++;
	if (sm)
		out[w] = '\0';
}

typedef struct scan {
	const char *kernel, *arch, *path;
	char section[CELL_MAX]; /* the last heading's architecture */
	columns c;
	int header, found;
	double occ;
} scan;

static int scan_line(scan *s, const char *line, size_t n)
{
	char cells[MAX_COLUMNS][CELL_MAX];
	int cols = split_row(cells, line, n);
	double v = 0;
	int err;

	if (cols < 0) {
		s->header = 0; /* a table ended: the next one brings its own header */
		if (n > 0 && line[0] == '#')
			heading_arch(s->section, sizeof s->section, line, n);
		return 0;
	}
	if (!s->header) {
		s->header = find_columns(&s->c, cells, cols);
		return 0;
	}
	if (s->c.kernel >= cols || s->c.occupancy >= cols || s->c.arch >= cols ||
	    strcmp(cells[s->c.kernel], s->kernel) != 0 ||
	    !arch_matches(s->c.arch >= 0 ? cells[s->c.arch] : s->section, s->arch))
		return 0;
	if ((err = parse_occupancy(&v, cells[s->c.occupancy], s->path)))
		return err;
	if (!s->found || v < s->occ)
		s->occ = v;
	s->found = 1;
	return 0;
}

int nf_roofline_occupancy(double *out, const char *path, const char *kernel, const char *arch)
{
	scan s = {.kernel = kernel, .arch = arch, .path = path};
	char *text = NULL;
	size_t len = 0;
	int err = 0;

	*out = 1;
	if (!nf_fs_exists(path))
		return 0;
	if ((err = nf_fs_read_file(&text, &len, path, DOC_MAX_BYTES)))
		return err;
	for (const char *line = text; *line && !err;) {
		size_t n = strcspn(line, "\n");
		err = scan_line(&s, line, n);
		line += n + (line[n] == '\n');
	}
	free(text);
	if (err)
		return err;
	if (s.found)
		*out = s.occ;
	return s.found;
}

const char *nf_roofline_gemv_kernel(nf_precision p)
{
	const nf_precision_info *info = nf_precision_info_of(p);
	switch (info ? info->weights : NF_QUANT_KIND_COUNT) {
	case NF_QUANT_NONE: return "nf_cu_gemv_f32";
	case NF_QUANT_F16: return "nf_cu_gemv_f16";
	case NF_QUANT_BF16: return "nf_cu_gemv_bf16";
	case NF_QUANT_INT8_ROW: return "nf_cu_gemv_q8";
	case NF_QUANT_INT4_GROUP: return "nf_cu_gemv_q4";
	case NF_QUANT_FP8_E4M3: return "nf_cu_gemv_f8";
	default: return "";
	}
}
