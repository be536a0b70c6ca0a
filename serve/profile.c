/*
 * profile.c - profile fitting and ranking for nimserve's start.
 */
#include "serve/profile.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/banned.h"

/* "sm_90" -> 9.0, "sm_100" -> 10.0, "sm_86" -> 8.6. */
static int parse_arch(int *major, int *minor, const char *arch)
{
	size_t n;
	if (strncmp(arch, "sm_", 3) != 0)
		return -1;
	arch += 3;
	n = strlen(arch);
	if (n < 2 || n > 3 || strspn(arch, "0123456789") != n)
		return -1;
	*minor = arch[n - 1] - '0';
	*major = 0;
	for (size_t i = 0; i + 1 < n; i++)
		*major = *major * 10 + (arch[i] - '0');
	return 0;
}

/* The SKU's family ("h100" of "h100-sxm") appears in the GPU's name. */
static int sku_matches(const char *sku, const char *gpu_name)
{
	char fam[32];
	size_t n = strcspn(sku, "-");
	if (n == 0 || n >= sizeof fam)
		return 0;
	for (size_t i = 0; i < n; i++)
		fam[i] = (char)tolower((unsigned char)sku[i]);
	fam[n] = '\0';
	for (const char *p = gpu_name; *p; p++) {
		size_t i = 0;
		while (i < n && p[i] && tolower((unsigned char)p[i]) == fam[i])
			i++;
		if (i == n)
			return 1;
	}
	return 0;
}

static void eval_one(nf_profile_fit *f, const nf_manifest_profile *p, const nf_gpu_list *g,
		     int check_files)
{
	nf_precision prec;
	memset(f, 0, sizeof *f);
	if (p->gate == NF_GATE_FAILED) {
		snprintf(f->reason, sizeof f->reason, "its correctness gate failed at build time");
		return;
	}
	if (nf_precision_parse(&prec, p->precision) < 0) {
		snprintf(f->reason, sizeof f->reason, "unknown precision %s", p->precision);
		return;
	}
	if (!strcmp(p->device, "cpu")) {
		if (!nf_precision_cpu_supported(prec)) {
			snprintf(f->reason, sizeof f->reason, "the CPU backend cannot run %s", p->precision);
			return;
		}
		if (p->tensor_parallel != 1) {
			snprintf(f->reason, sizeof f->reason, "CPU profiles run with tensor_parallel 1, not %d",
				 p->tensor_parallel);
			return;
		}
		f->device_rank = 2;
	} else {
		int major = 0, minor = 0, found = 0, named = 0;
		if (parse_arch(&major, &minor, p->arch) < 0) {
			snprintf(f->reason, sizeof f->reason, "bad arch '%s'", p->arch);
			return;
		}
		for (int i = 0; i < g->count; i++)
			if (g->gpus[i].major == major && g->gpus[i].minor == minor) {
				found++;
				/* the driver loader's match when it made one ("l4" is not an L40S) */
				named += g->gpus[i].sku ? !strcmp(g->gpus[i].sku, p->device)
							: sku_matches(p->device, g->gpus[i].name);
			}
		if (found == 0) {
			snprintf(f->reason, sizeof f->reason, "no GPU with compute capability %d.%d found (%s)",
				 major, minor, g->note);
			return;
		}
		if (found < p->tensor_parallel) {
			snprintf(f->reason, sizeof f->reason,
				 "needs %d GPUs with compute capability %d.%d, found %d",
				 p->tensor_parallel, major, minor, found);
			return;
		}
		f->device_rank = named >= p->tensor_parallel ? 0 : 1;
	}
	if (check_files) {
		char *cfg = nf_path_join(p->engine_path, "config.json");
		int present = cfg && nf_fs_exists(cfg);
		free(cfg);
		if (!present) {
			snprintf(f->reason, sizeof f->reason, "engine folder %s has no config.json",
				 p->engine_path);
			return;
		}
	}
	f->fits = 1;
	snprintf(f->reason, sizeof f->reason, "fits");
}

void nf_profile_evaluate(nf_profile_fit *fits, const nf_manifest *m, const nf_gpu_list *gpus,
			 int check_files)
{
	for (size_t i = 0; i < m->n_profiles; i++)
		eval_one(&fits[i], &m->profiles[i], gpus, check_files);
}

static size_t prec_rank(const nf_manifest *m, const char *prec)
{
	for (size_t i = 0; i < m->n_precision_pref; i++)
		if (!strcmp(m->precision_pref[i], prec))
			return i;
	return m->n_precision_pref;
}

static size_t tp_rank(const nf_manifest *m, int tp)
{
	for (size_t i = 0; i < m->n_tp_pref; i++)
		if (m->tp_pref[i] == tp)
			return i;
	return m->n_tp_pref;
}

/* <0 if a is better than b. */
static int compare(const nf_manifest *m, const nf_profile_fit *fits, size_t a, size_t b)
{
	const nf_manifest_profile *pa = &m->profiles[a], *pb = &m->profiles[b];
	size_t ra, rb;
	if (fits[a].device_rank != fits[b].device_rank)
		return fits[a].device_rank - fits[b].device_rank;
	ra = prec_rank(m, pa->precision);
	rb = prec_rank(m, pb->precision);
	if (ra != rb)
		return ra < rb ? -1 : 1;
	ra = tp_rank(m, pa->tensor_parallel);
	rb = tp_rank(m, pb->tensor_parallel);
	if (ra != rb)
		return ra < rb ? -1 : 1;
	if (pa->gate != pb->gate)
		return pa->gate == NF_GATE_PASSED ? -1 : 1;
	return a < b ? -1 : 1;
}

static void list_fitting(char *buf, size_t len, const nf_manifest *m, const nf_profile_fit *fits)
{
	size_t used = 0;
	int any = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < m->n_profiles && used < len; i++) {
		if (!fits[i].fits)
			continue;
		int w = snprintf(buf + used, len - used, "%s%s", any ? ", " : "", m->profiles[i].name);
		if (w < 0)
			break;
		used += (size_t)w;
		any = 1;
	}
	if (!any)
		snprintf(buf, len, "none");
}

int nf_profile_select(size_t *out, char *why, size_t why_len, const nf_manifest *m,
		      const nf_gpu_list *gpus, const char *forced, int check_files)
{
	nf_profile_fit *fits = NULL;
	char fitting[1024];
	size_t best = (size_t)-1;
	int rc;

	fits = calloc(m->n_profiles ? m->n_profiles : 1, sizeof *fits);
	if (!fits)
		return nf_error_set(NF_ENOMEM, "out of memory");
	nf_profile_evaluate(fits, m, gpus, check_files);
	list_fitting(fitting, sizeof fitting, m, fits);
	if (forced && *forced) {
		for (size_t i = 0; i < m->n_profiles; i++)
			if (!strcmp(m->profiles[i].id, forced) || !strcmp(m->profiles[i].name, forced))
				best = i;
		if (best == (size_t)-1) {
			rc = nf_error_set(NF_ENOTFOUND,
					  "NIM_MODEL_PROFILE=%s names no profile in %s; profiles that fit this machine: %s",
					  forced, m->path, fitting);
			goto done;
		}
		if (!fits[best].fits) {
			rc = nf_error_set(NF_EINPUT,
					  "profile %s was forced but does not fit this machine: %s; profiles that fit: %s",
					  m->profiles[best].name, fits[best].reason, fitting);
			goto done;
		}
		snprintf(why, why_len, "forced by NIM_MODEL_PROFILE=%s", forced);
		*out = best;
		rc = 0;
		goto done;
	}
	for (size_t i = 0; i < m->n_profiles; i++)
		if (fits[i].fits && (best == (size_t)-1 || compare(m, fits, i, best) < 0))
			best = i;
	if (best == (size_t)-1) {
		rc = nf_error_set(NF_EINPUT, "no profile in %s fits this machine (%s); see nimserve --list-profiles",
				  m->path, gpus->note);
		goto done;
	}
	{
		const nf_manifest_profile *p = &m->profiles[best];
		size_t pr = prec_rank(m, p->precision), tr = tp_rank(m, p->tensor_parallel);
		char prs[48], trs[48];
		if (pr < m->n_precision_pref)
			snprintf(prs, sizeof prs, "preference #%zu", pr + 1);
		else
			snprintf(prs, sizeof prs, "not in the preferences");
		if (tr < m->n_tp_pref)
			snprintf(trs, sizeof trs, "preference #%zu", tr + 1);
		else
			snprintf(trs, sizeof trs, "not in the preferences");
		snprintf(why, why_len,
			 "best fit: device %s (%s), precision %s (%s), tensor_parallel %d (%s), gate %s; fitting: %s",
			 p->device,
			 fits[best].device_rank == 0 ? "matching GPU" :
			 fits[best].device_rank == 1 ? "GPU of the same arch" : "no GPU profile fits",
			 p->precision, prs, p->tensor_parallel, trs, nf_gate_name(p->gate), fitting);
	}
	*out = best;
	rc = 0;
done:
	free(fits);
	return rc;
}

void nf_profile_print(FILE *f, const nf_manifest *m, const nf_gpu_list *gpus, int check_files)
{
	nf_profile_fit *fits = calloc(m->n_profiles ? m->n_profiles : 1, sizeof *fits);
	if (!fits)
		return;
	nf_profile_evaluate(fits, m, gpus, check_files);
	fprintf(f, "# %s; %s\n", m->path, gpus->note);
	for (int i = 0; i < gpus->count; i++)
		fprintf(f, "# gpu %d: %s (compute capability %d.%d)\n", i, gpus->gpus[i].name,
			gpus->gpus[i].major, gpus->gpus[i].minor);
	fprintf(f, "%-64s  %-24s %-10s %-6s %-9s %-3s %-7s %s\n", "ID", "NAME", "DEVICE", "ARCH",
		"PRECISION", "TP", "GATE", "FITS");
	for (size_t i = 0; i < m->n_profiles; i++) {
		const nf_manifest_profile *p = &m->profiles[i];
		fprintf(f, "%-64s  %-24s %-10s %-6s %-9s %-3d %-7s %s%s%s\n", p->id, p->name, p->device,
			*p->arch ? p->arch : "-", p->precision, p->tensor_parallel, nf_gate_name(p->gate),
			fits[i].fits ? "yes" : "no", fits[i].fits ? "" : ": ", fits[i].fits ? "" : fits[i].reason);
	}
	free(fits);
}
