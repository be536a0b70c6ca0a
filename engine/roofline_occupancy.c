/*
 * roofline_occupancy.c - the static occupancy of a GEMV kernel, read from the
 * kernels' table in docs/cuda-kernels.md (written from `ptxas -v` by the
 * CUDA kernels' checks) for the roofline model (roofline.h).  The table is a
 * markdown table whose header names a "kernel", an "arch" and an
 * "occupancy" column, in any order, among others.
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
	int kernel, arch, occupancy;
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
	return c->kernel >= 0 && c->arch >= 0 && c->occupancy >= 0;
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

static int row_matches(char cells[MAX_COLUMNS][CELL_MAX], const columns *c, const char *format,
		       const char *arch)
{
	size_t n = strlen(arch);
	return strstr(cells[c->kernel], "gemv") && strstr(cells[c->kernel], format) &&
	       strncmp(cells[c->arch], arch, n) == 0 && !isdigit((unsigned char)cells[c->arch][n]);
}

int nf_roofline_occupancy(double *out, const char *path, const char *format, const char *arch)
{
	char *text = NULL, cells[MAX_COLUMNS][CELL_MAX];
	size_t len = 0;
	columns c = {-1, -1, -1};
	int found = 0, err = 0, header = 0;

	*out = 1;
	if (!nf_fs_exists(path))
		return 0;
	if ((err = nf_fs_read_file(&text, &len, path, DOC_MAX_BYTES)))
		return err;
	for (const char *line = text; *line && !err;) {
		size_t n = strcspn(line, "\n");
		int cols = split_row(cells, line, n);
		if (cols < 0)
			header = 0; /* a table ended: the next one brings its own header */
		else if (!header)
			header = find_columns(&c, cells, cols);
		else if (c.occupancy < cols && c.kernel < cols && c.arch < cols &&
			 row_matches(cells, &c, format, arch)) {
			double v = 0;
			if (!(err = parse_occupancy(&v, cells[c.occupancy], path)) && (!found || v < *out))
				*out = v;
			found = !err;
		}
		line += n + (line[n] == '\n');
	}
	free(text);
	if (err) {
		*out = 1;
		return err;
	}
	return found;
}
