/*
 * registry_push.c - push an image (or index) of an OCI layout with its
 * artifacts, and promote an image between repositories of one registry by
 * cross-repository mounts (see registry.h).
 */
#define _GNU_SOURCE
#include "images/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "images/artifact.h"
#include "images/layout.h"
#include "images/manifest.h"
#include "images/registry_http.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/banned.h"

#define REPORT_MAX ((size_t)4 << 20)

/* A set of digests already handled (linear: images have few blobs). */
typedef struct digest_set {
	char (*d)[NF_OCI_DIGEST_LEN + 1];
	size_t n, cap;
} digest_set;

static bool set_has(const digest_set *s, const char *dg)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->d[i], dg))
			return true;
	return false;
}

static int set_add(digest_set *s, const char *dg)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		void *nd = realloc(s->d, cap * sizeof(*s->d));
		if (!nd)
			return nf_error_set(NF_ENOMEM, "out of memory");
		s->d = nd;
		s->cap = cap;
	}
	snprintf(s->d[s->n++], NF_OCI_DIGEST_LEN + 1, "%s", dg);
	return 0;
}

static bool is_index(const char *mt)
{
	return !strcmp(mt, NF_OCI_MT_INDEX) || !strcmp(mt, NF_OCI_MT_DOCKER_LIST);
}

/* The entry ref names, or the only entry of index.json that is not an artifact. */
static int resolve_top(nf_oci_desc *out, const char *layout, const char *ref)
{
	json_t *idx = NULL, *m = NULL;
	const json_t *e;
	size_t i, found = 0;
	int err;

	if (ref)
		return nf_oci_layout_resolve(out, layout, ref);
	if ((err = nf_oci_layout_read_index(&idx, layout)))
		return err;
	json_array_foreach(json_object_get(idx, "manifests"), i, e) {
		nf_oci_desc d;
		nf_oci_artifact a;
		if ((err = nf_oci_desc_parse(&d, e, layout)))
			goto done;
		if (!strcmp(d.media_type, NF_OCI_MT_MANIFEST)) {
			json_decref(m);
			m = NULL;
			if ((err = nf_oci_json_read_blob(&m, layout, &d)))
				goto done;
			if (nf_oci_artifact_parse(&a, m, layout) != NF_ENOTFOUND)
				continue;
		}
		*out = d;
		found++;
	}
	nf_error_clear();
	if (found != 1)
		err = nf_error_set(found ? NF_EINPUT : NF_ENOTFOUND,
				   "%s: %s image in index.json: name one with OCI_DIR:TAG", layout,
				   found ? "more than one" : "no");
done:
	json_decref(m);
	json_decref(idx);
	return err;
}

/* Make blob d present in name: skip, mount from `from`, or upload from the layout. */
static int push_blob(nf_reg_client *c, const char *layout, const char *name, const nf_oci_desc *d,
		     const char *from)
{
	bool there = false, mounted = false;
	char *path = NULL;
	int err;

	if ((err = nf_reg_blob_exists(&there, c, name, d)))
		return err;
	if (there) {
		c->st.blobs_present++;
		nf_reg_logf(c, "blob %s present", d->digest);
		return 0;
	}
	if (from && strcmp(from, name)) {
		if ((err = nf_reg_blob_mount(&mounted, c, name, from, d->digest)))
			return err;
		if (mounted) {
			nf_reg_logf(c, "blob %s mounted from %s", d->digest, from);
			return 0;
		}
	}
	if ((err = nf_oci_blob_path(&path, layout, d->digest)))
		return err;
	err = nf_reg_blob_upload_file(c, name, path, d);
	free(path);
	return err;
}

/* PUT bytes under ref unless ref already names exactly these bytes. */
static int put_manifest(bool *subject_ok, bool *was_there, nf_reg_client *c, const char *name,
			const char *ref, const nf_oci_desc *d, const char *bytes, size_t len)
{
	bool exists = false;
	nf_oci_desc have;
	int err;

	*was_there = false;
	if (subject_ok)
		*subject_ok = false;
	if ((err = nf_reg_manifest_head(&exists, &have, c, name, ref)))
		return err;
	if (exists && !strcmp(have.digest, d->digest)) {
		c->st.manifests_present++;
		*was_there = true;
		nf_reg_logf(c, "manifest %s:%s present", name, ref);
		return 0;
	}
	return nf_reg_manifest_put(subject_ok, c, name, ref, d->media_type, bytes, len);
}

/* Push one artifact manifest (its blobs first) and index it as a referrer of subject. */
static int push_artifact(nf_reg_client *c, const char *layout, const char *name,
			 const json_t *adesc, const char *subject)
{
	nf_oci_desc d;
	nf_oci_artifact a;
	json_t *m = NULL, *refs = NULL;
	char *bytes = NULL;
	size_t len = 0;
	bool subject_ok = false, there = false, listed = false;
	int err;

	if ((err = nf_oci_desc_parse(&d, adesc, layout)))
		return err;
	if ((err = nf_oci_blob_read(&bytes, &len, layout, &d, NF_OCI_JSON_MAX)))
		return err;
	m = json_loadb(bytes, len, JSON_REJECT_DUPLICATES, NULL);
	if ((err = nf_oci_artifact_parse(&a, m, layout)))
		goto done;
	if ((err = push_blob(c, layout, name, &a.config, NULL)) ||
	    (err = push_blob(c, layout, name, &a.blob, NULL)))
		goto done;
	if ((err = put_manifest(&subject_ok, &there, c, name, d.digest, &d, bytes, len)))
		goto done;
	if (subject_ok)
		goto done;
	if (there) {
		bool via_api = false;
		const json_t *e;
		size_t i;
		if ((err = nf_reg_referrers(&refs, &via_api, c, name, subject, NULL)))
			goto done;
		json_array_foreach(refs, i, e)
			if (!strcmp(json_string_value(json_object_get(e, "digest")), d.digest))
				listed = true;
		if (listed)
			goto done;
	}
	err = nf_reg_referrers_tag_add(c, name, subject, adesc);
done:
	json_decref(m);
	json_decref(refs);
	free(bytes);
	return err;
}

/* The image manifests to push: an index's entries (*kids, the caller frees
 * it; nested indexes refused), or top itself. */
static int list_images(nf_oci_desc **kids, size_t *n_kids, const char *layout,
		       const nf_oci_desc *top)
{
	json_t *topj = NULL;
	const json_t *arr, *e;
	size_t i;
	int err = 0;

	*n_kids = 0;
	if (!is_index(top->media_type)) {
		if (!(*kids = calloc(1, sizeof(**kids))))
			return nf_error_set(NF_ENOMEM, "out of memory");
		(*kids)[(*n_kids)++] = *top;
		return 0;
	}
	if ((err = nf_oci_json_read_blob(&topj, layout, top)))
		return err;
	arr = json_object_get(topj, "manifests");
	if (!json_is_array(arr) || json_array_size(arr) > NF_OCI_LIST_MAX) {
		err = nf_error_set(NF_EINPUT, "%s: index %s: bad manifests list", layout, top->digest);
		goto done;
	}
	if (!(*kids = calloc(json_array_size(arr) + 1, sizeof(**kids)))) {
		err = nf_error_set(NF_ENOMEM, "out of memory");
		goto done;
	}
	json_array_foreach(arr, i, e) {
		if ((err = nf_oci_desc_parse(&(*kids)[*n_kids], e, layout)))
			goto done;
		if (is_index((*kids)[*n_kids].media_type)) {
			err = nf_error_set(NF_EUNSUPPORTED, "%s: nested image indexes are not pushed", layout);
			goto done;
		}
		(*n_kids)++;
	}
done:
	json_decref(topj);
	return err;
}

/* Every blob of image manifest d not in done_blobs (then added to it). */
static int push_image_blobs(nf_reg_client *c, const char *layout, const char *name,
			    const nf_oci_desc *d, const char *mount_from, digest_set *done_blobs)
{
	nf_oci_manifest *pm = NULL;
	json_t *m = NULL;
	int err;

	if ((err = nf_oci_json_read_blob(&m, layout, d)) || (err = nf_oci_manifest_parse(&pm, m, layout)))
		goto done;
	for (size_t b = 0; b <= pm->n_layers && !err; b++) {
		const nf_oci_desc *bd = b == 0 ? &pm->config : &pm->layers[b - 1];
		if (set_has(done_blobs, bd->digest))
			continue;
		if (!(err = push_blob(c, layout, name, bd, mount_from)))
			err = set_add(done_blobs, bd->digest);
	}
done:
	nf_oci_manifest_free(pm);
	json_decref(m);
	return err;
}

/* The layout's manifest d put under ref in name. */
static int put_layout_manifest(nf_reg_client *c, const char *layout, const char *name,
			       const char *ref, const nf_oci_desc *d)
{
	char *bytes = NULL;
	size_t len = 0;
	bool there = false;
	int err;

	if (!(err = nf_oci_blob_read(&bytes, &len, layout, d, NF_OCI_JSON_MAX)))
		err = put_manifest(NULL, &there, c, name, ref, d, bytes, len);
	free(bytes);
	return err;
}

/* The layout's artifacts about subject, each with its referrer entry. */
static int push_artifacts_about(nf_reg_client *c, const char *layout, const char *name,
				const char *subject)
{
	json_t *arts = NULL;
	const json_t *e;
	size_t k;
	int err;

	if ((err = nf_oci_artifact_list(&arts, layout, subject, NULL)))
		return err;
	json_array_foreach(arts, k, e)
		if ((err = push_artifact(c, layout, name, e, subject)))
			break;
	json_decref(arts);
	return err;
}

int nf_reg_push_layout(nf_oci_desc *out, nf_reg_client *c, const char *layout, const char *ref,
		       const char *name, const char *tag, const char *mount_from)
{
	nf_oci_desc top, *kids = NULL;
	size_t n_kids = 0, i;
	digest_set done_blobs = {0};
	int err;

	memset(out, 0, sizeof(*out));
	if ((err = resolve_top(&top, layout, ref)) || (err = nf_reg_ping(c)) ||
	    (err = list_images(&kids, &n_kids, layout, &top)))
		goto done;
	/* blobs, then each image manifest by digest (a lone image only when no tag names it) */
	for (i = 0; i < n_kids; i++) {
		if ((err = push_image_blobs(c, layout, name, &kids[i], mount_from, &done_blobs)))
			goto done;
		if ((is_index(top.media_type) || !tag) &&
		    (err = put_layout_manifest(c, layout, name, kids[i].digest, &kids[i])))
			goto done;
	}
	/* the tagged manifest or index */
	if (tag && (err = put_layout_manifest(c, layout, name, tag, &top)))
		goto done;
	/* artifacts about the index or any of its manifests */
	for (i = 0; i <= n_kids; i++) {
		const char *subject = i == 0 ? top.digest : kids[i - 1].digest;
		if (i > 0 && !strcmp(subject, top.digest))
			continue;
		if ((err = push_artifacts_about(c, layout, name, subject)))
			goto done;
	}
	*out = top;
done:
	if (err)
		nf_error_wrap(err, "push %s to %s/%s", layout, c->host, name);
	free(kids);
	free(done_blobs.d);
	return err;
}

/* ---- promote ---- */

/* Mount every blob of manifest bytes from src into dst (never uploads). */
static int mount_blobs(nf_reg_client *c, const char *dst, const char *src, const json_t *m,
		       digest_set *seen, uint64_t *mounted)
{
	nf_oci_manifest *pm = NULL;
	int err;

	if ((err = nf_oci_manifest_parse(&pm, (json_t *)m, "manifest")))
		return err;
	for (size_t b = 0; b <= pm->n_layers && !err; b++) {
		const nf_oci_desc *bd = b == 0 ? &pm->config : &pm->layers[b - 1];
		bool there = false, ok = false;
		if (set_has(seen, bd->digest))
			continue;
		if ((err = set_add(seen, bd->digest)) || (err = nf_reg_blob_exists(&there, c, dst, bd)))
			break;
		if (there) {
			c->st.blobs_present++;
			continue;
		}
		if ((err = nf_reg_blob_mount(&ok, c, dst, src, bd->digest)))
			break;
		if (!ok) {
			err = nf_error_set(NF_ENET, "registry %s would not mount blob %s from %s into %s",
					   c->host, bd->digest, src, dst);
			break;
		}
		(*mounted)++;
	}
	nf_oci_manifest_free(pm);
	return err;
}

/* Find and read the gate report referring to subject in src. */
static int read_report(nf_reg_promotion *p, json_t **am, char **abytes, size_t *alen,
		       nf_reg_client *c, const char *name, const char *subject)
{
	json_t *refs = NULL;
	char *rb = NULL;
	size_t rl = 0, n;
	nf_oci_desc ad;
	nf_oci_artifact a;
	int err;

	if ((err = nf_reg_referrers(&refs, NULL, c, name, subject, NF_OCI_ARTIFACT_GATE_REPORT)))
		goto done;
	n = json_array_size(refs);
	if (n == 0)
		goto done;
	/* the last one listed is the newest */
	if ((err = nf_oci_desc_parse(&ad, json_array_get(refs, n - 1), "referrer")))
		goto done;
	if ((err = nf_reg_manifest_get(abytes, alen, &p->report, c, name, ad.digest)))
		goto done;
	*am = json_loadb(*abytes, *alen, 0, NULL);
	if ((err = nf_oci_artifact_parse(&a, *am, "gate report artifact"))) {
		if (err == NF_ENOTFOUND)
			err = nf_error_set(NF_EINPUT, "gate report artifact %s has no subject", ad.digest);
		goto done;
	}
	if (strcmp(a.subject.digest, subject)) {
		err = nf_error_set(NF_EINPUT, "gate report artifact %s is about %s, not %s", ad.digest,
				   a.subject.digest, subject);
		goto done;
	}
	if ((err = nf_reg_blob_get(&rb, &rl, c, name, &a.blob, REPORT_MAX)) ||
	    (err = nf_oci_gate_verdict(p->verdict, rb, rl)))
		goto done;
	p->report_found = true;
done:
	json_decref(refs);
	free(rb);
	return err;
}

/* What one promotion's phases share: where from, where to, what is done. */
typedef struct promotion {
	nf_reg_promotion *out;
	nf_reg_client *c;
	const char *src_name, *dst_name;
	digest_set seen; /* blobs already mounted or found in dst */
} promotion;

/* The refusals that need no request: one registry for both, a source to
 * read and a destination to write. */
static int check_refs(const nf_reg_client *c, const nf_reg_ref *src, const nf_reg_ref *dst,
		      const char *src_ref, const char *dst_tag)
{
	if (strcmp(src->host, dst->host) || strcmp(src->host, c->host))
		return nf_error_set(NF_EINPUT, "promote: source and destination must be on the same registry (%s, %s)",
				    src->host, dst->host);
	if (!src_ref[0])
		return nf_error_set(NF_EINPUT, "promote: the source needs a tag or a digest");
	if (!dst_tag[0] && !dst->digest[0])
		return nf_error_set(NF_EINPUT, "promote: the destination needs a tag");
	return 0;
}

/* NF_EGATE unless the gate report says "passed" or force overrides it (the
 * override is kept in out->forced and logged). */
static int check_verdict(promotion *p, const char *src_ref, bool force)
{
	nf_reg_promotion *out = p->out;
	if (out->report_found && !strcmp(out->verdict, "passed"))
		return 0;
	if (!force)
		return out->report_found
			       ? nf_error_set(NF_EGATE, "promote: the gate report of %s/%s says '%s': refused (--force-unpassed overrides)",
					      p->src_name, src_ref, out->verdict)
			       : nf_error_set(NF_EGATE, "promote: no gate report refers to %s/%s (%s): refused (--force-unpassed overrides)",
					      p->src_name, src_ref, out->manifest.digest);
	out->forced = true;
	nf_reg_logf(p->c, "promote: forced despite gate verdict '%s'", out->report_found ? out->verdict : "missing");
	return 0;
}

/* One manifest an index lists (entry e): its blobs mounted, then itself put
 * by digest.  Nested indexes are refused. */
static int copy_index_entry(promotion *p, const json_t *e)
{
	nf_oci_desc kd, got;
	char *bytes = NULL;
	size_t len = 0;
	json_t *kj = NULL;
	bool there = false;
	int err;

	if ((err = nf_oci_desc_parse(&kd, e, "index")) ||
	    (err = nf_reg_manifest_get(&bytes, &len, &got, p->c, p->src_name, kd.digest)))
		goto done;
	if (is_index(got.media_type)) {
		err = nf_error_set(NF_EUNSUPPORTED, "promote: nested image indexes are not supported");
		goto done;
	}
	kj = json_loadb(bytes, len, 0, NULL);
	if (!(err = mount_blobs(p->c, p->dst_name, p->src_name, kj, &p->seen, &p->out->blobs_mounted)))
		err = put_manifest(NULL, &there, p->c, p->dst_name, kd.digest, &got, bytes, len);
done:
	free(bytes);
	json_decref(kj);
	return err;
}

/* The image (top_bytes, out->manifest) into dst under dst_ref: its blobs,
 * or each of its manifests' blobs and the manifests, first; then itself. */
static int copy_image(promotion *p, const char *top_bytes, size_t top_len, const char *dst_ref)
{
	json_t *topj = json_loadb(top_bytes, top_len, 0, NULL);
	bool there = false;
	int err = 0;

	if (!topj)
		return nf_error_set(NF_ENOMEM, "out of memory");
	if (is_index(p->out->manifest.media_type)) {
		const json_t *e;
		size_t i;
		json_array_foreach(json_object_get(topj, "manifests"), i, e)
			if ((err = copy_index_entry(p, e)))
				break;
	} else {
		err = mount_blobs(p->c, p->dst_name, p->src_name, topj, &p->seen, &p->out->blobs_mounted);
	}
	if (!err)
		err = put_manifest(NULL, &there, p->c, p->dst_name, dst_ref, &p->out->manifest, top_bytes,
				   top_len);
	json_decref(topj);
	return err;
}

/* The report manifest am with the forced promotion annotated on it: new
 * bytes (*bytes, *len, the caller frees) and so a new digest and size in *nd. */
static int annotate_forced(char **bytes, size_t *len, nf_oci_desc *nd, json_t *am,
			   const char *verdict)
{
	json_t *ann = json_object_get(am, "annotations");
	char hex[65];
	int err;

	if (!json_is_object(ann)) {
		ann = json_object();
		json_object_set_new(am, "annotations", ann);
	}
	json_object_set_new(ann, NF_OCI_ANN_PROMOTE_FORCED, json_string("true"));
	json_object_set_new(ann, "io.nimfactory.promote.verdict", json_string(verdict));
	if ((err = nf_oci_json_dump(bytes, len, am)) || (err = nf_sha256_hex(hex, *bytes, *len)))
		return err;
	snprintf(nd->digest, sizeof(nd->digest), "sha256:%s", hex);
	nd->size = *len;
	return 0;
}

/* For a registry that did not take the report as a referrer (no
 * OCI-Subject in its answer): list it under the referrers tag instead. */
static int tag_referrer(promotion *p, const nf_oci_desc *nd, const char *artifact_type,
			json_t *am)
{
	json_t *dj = nf_oci_desc_json(nd);
	int err;

	if (!dj)
		return nf_error_set(NF_ENOMEM, "out of memory");
	json_object_set_new(dj, "artifactType", json_string(artifact_type));
	if (json_is_object(json_object_get(am, "annotations")))
		json_object_set(dj, "annotations", json_object_get(am, "annotations"));
	err = nf_reg_referrers_tag_add(p->c, p->dst_name, p->out->manifest.digest, dj);
	json_decref(dj);
	return err;
}

/* The gate report (am, abytes) travels with the image: its blobs, itself
 * (re-annotated when forced) and its referrer entry.  Sets out->report. */
static int copy_report(promotion *p, json_t *am, const char *abytes, size_t alen)
{
	nf_reg_promotion *out = p->out;
	nf_oci_artifact a;
	nf_oci_desc nd = out->report;
	char *newa = NULL;
	size_t newa_len = 0;
	bool subject_ok = false, there = false;
	int err;

	if ((err = nf_oci_artifact_parse(&a, am, "gate report artifact")) ||
	    (err = mount_blobs(p->c, p->dst_name, p->src_name, am, &p->seen, &out->blobs_mounted)))
		goto done;
	if (out->forced && (err = annotate_forced(&newa, &newa_len, &nd, am, out->verdict)))
		goto done;
	if ((err = put_manifest(&subject_ok, &there, p->c, p->dst_name, nd.digest, &nd,
				newa ? newa : abytes, newa ? newa_len : alen)))
		goto done;
	out->report = nd;
	if (!subject_ok)
		err = tag_referrer(p, &nd, a.artifact_type, am);
done:
	free(newa);
	return err;
}

int nf_reg_promote(nf_reg_promotion *out, nf_reg_client *c, const nf_reg_ref *src,
		   const nf_reg_ref *dst, bool force)
{
	char *top_bytes = NULL, *abytes = NULL;
	size_t top_len = 0, alen = 0;
	json_t *am = NULL;
	const char *src_ref = src->digest[0] ? src->digest : src->tag;
	const char *dst_tag = dst->tag[0] ? dst->tag : src->tag;
	promotion p = {.out = out, .c = c, .src_name = src->name, .dst_name = dst->name};
	int err;

	memset(out, 0, sizeof(*out));
	if ((err = check_refs(c, src, dst, src_ref, dst_tag)))
		return err;
	if ((err = nf_reg_ping(c)) ||
	    (err = nf_reg_manifest_get(&top_bytes, &top_len, &out->manifest, c, src->name, src_ref)))
		goto done;
	if (dst->digest[0] && strcmp(dst->digest, out->manifest.digest)) {
		err = nf_error_set(NF_EINPUT, "promote: destination digest %s is not the source's %s",
				   dst->digest, out->manifest.digest);
		goto done;
	}
	/* the gate report first: nothing is written when it refuses */
	if ((err = read_report(out, &am, &abytes, &alen, c, src->name, out->manifest.digest)) ||
	    (err = check_verdict(&p, src_ref, force)) ||
	    (err = copy_image(&p, top_bytes, top_len, dst_tag[0] ? dst_tag : dst->digest)))
		goto done;
	if (out->report_found)
		err = copy_report(&p, am, abytes, alen);
done:
	if (err && err != NF_EGATE)
		nf_error_wrap(err, "promote %s/%s to %s", src->name, src_ref, dst->name);
	free(top_bytes);
	free(abytes);
	json_decref(am);
	free(p.seen.d);
	return err;
}
