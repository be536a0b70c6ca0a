/*
 * jinja.c - the public face of the Jinja interpreter (engine/jinja.h):
 * compile = lex + parse into an arena the template owns; render = a fresh
 * arena for the values, the context converted into the global frame, the
 * tree run, the output handed over.
 */
#include "engine/jinja.h"

#include <stdlib.h>
#include <string.h>

#include "engine/jinja_int.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/banned.h"

/* The largest template we compile; real chat templates are a few KiB. */
#define MAX_SOURCE ((size_t)4 << 20)

struct nf_jinja {
	nf_jarena arena;
	nf_jnode *root;
	char *what;
};

void nf_jinja_limits_default(nf_jinja_limits *l)
{
	l->max_out = (size_t)4 << 20;
	l->max_mem = (size_t)256 << 20;
	l->max_steps = 20000000;
	l->max_depth = 128;
}

int nf_jinja_compile(nf_jinja **out, const char *src, size_t len, const char *what)
{
	nf_jinja *t = NULL;
	nf_jtok *toks = NULL;
	size_t ntok = 0, arena_max;
	int err;
	*out = NULL;
	if (!what)
		what = "template";
	if (len > MAX_SOURCE)
		return nf_error_set(NF_EINPUT, "%s: template longer than %zu bytes", what, MAX_SOURCE);
	if (!(t = calloc(1, sizeof(*t))) || !(t->what = strdup(what))) {
		free(t);
		return nf_error_set(NF_ENOMEM, "%s: out of memory", what);
	}
	/* tokens and nodes: a few hundred bytes per source byte at worst */
	if (!nf_size_mul(&arena_max, len, 512))
		arena_max = SIZE_MAX;
	nf_jarena_init(&t->arena, arena_max + ((size_t)1 << 20));
	err = nf_jinja_lex(&toks, &ntok, &t->arena, src, len, t->what);
	if (!err)
		err = nf_jinja_parse(&t->root, &t->arena, toks, ntok, t->what);
	if (err) {
		nf_jinja_free(t);
		return err;
	}
	*out = t;
	return 0;
}

void nf_jinja_free(nf_jinja *t)
{
	if (!t)
		return;
	nf_jarena_release(&t->arena);
	free(t->what);
	free(t);
}

static int set_globals(nf_jctx *c, const json_t *context)
{
	nf_jframe *f = nf_jarena_alloc(&c->arena, sizeof(*f));
	if (context && !json_is_object(context))
		return nf_error_set(NF_EINPUT, "%s: the context must be a JSON object", c->what);
	if (!f)
		return nf_jerr_mem(c, NULL);
	f->vars = context ? nf_jv_from_json(c, context, 0) : nf_jv_new(c, JV_DICT);
	if (!f->vars) {
		if (c->arena.over || !context)
			return nf_jerr_mem(c, NULL);
		return nf_error_set(NF_EINPUT, "%s: the context is nested more than %zu deep", c->what,
				    c->lim.max_depth);
	}
	c->frame = c->globals = f;
	return 0;
}

int nf_jinja_render_ex(char **out, size_t *out_len, const nf_jinja *t, const json_t *context,
		       const nf_jinja_limits *limits)
{
	nf_jctx c = {.lim = *limits, .what = t->what};
	int err;
	*out = NULL;
	if (out_len)
		*out_len = 0;
	nf_jarena_init(&c.arena, limits->max_mem);
	err = set_globals(&c, context);
	if (!err)
		err = nf_jexec(&c, t->root);
	if (!err && !c.out && !(c.out = calloc(1, 1)))
		err = nf_error_set(NF_ENOMEM, "%s: out of memory", t->what);
	nf_jarena_release(&c.arena);
	if (err) {
		free(c.out);
		return err;
	}
	*out = c.out;
	if (out_len)
		*out_len = c.out_len;
	return 0;
}

int nf_jinja_render(char **out, size_t *out_len, const nf_jinja *t, const json_t *context,
		    size_t max_out)
{
	nf_jinja_limits l;
	nf_jinja_limits_default(&l);
	l.max_out = max_out;
	return nf_jinja_render_ex(out, out_len, t, context, &l);
}

int nf_jinja_render_chat(char **out, size_t *out_len, const nf_jinja *t, const json_t *messages,
			 const char *bos_token, const char *eos_token, bool add_generation_prompt,
			 size_t max_out)
{
	json_t *ctx = json_object();
	int err;
	*out = NULL;
	if (!ctx || json_object_set(ctx, "messages", (json_t *)messages) ||
	    json_object_set_new(ctx, "bos_token", json_string(bos_token ? bos_token : "")) ||
	    json_object_set_new(ctx, "eos_token", json_string(eos_token ? eos_token : "")) ||
	    json_object_set_new(ctx, "add_generation_prompt", json_boolean(add_generation_prompt))) {
		json_decref(ctx);
		return nf_error_set(NF_ENOMEM, "%s: out of memory (or tokens not UTF-8)", t->what);
	}
	err = nf_jinja_render(out, out_len, t, ctx, max_out);
	json_decref(ctx);
	return err;
}
