/*
 * nf_synth_model.c - write a synthetic Llama model for benchmarks: a
 * llama2.c-format checkpoint with deterministic pseudo-random weights and a
 * matching llama2.c-format tokenizer.
 *
 *   nf_synth_model [--dim N] [--hidden N] [--layers N] [--heads N]
 *                  [--kv-heads N] [--vocab N] [--seq N] [--seed N]
 *                  MODEL_OUT TOKENIZER_OUT
 *
 * Default config: the ~110M Llama of llama2.c (dim 768, hidden 2048, 12
 * layers, 12 heads, 12 kv heads, vocab 32000, seq 1024), classifier shared
 * with the token embedding.  Weights are ~N(0, 0.02) from a fixed-seed
 * splitmix64 generator (Irwin-Hall sum of four uniforms); RMSNorm weights
 * are 1.  The same arguments always give the same bytes.
 *
 * Tokenizer (vocab_size tokens): ids 0..2 the specials "<unk>", "\n<s>\n",
 * "\n</s>\n" (llama2.c's), ids 3..258 the byte tokens "<0xXX>", then the
 * printable ASCII characters, then lowercase words of two letters and more,
 * each with and without a leading space; every word is the merge of two
 * shorter pieces, so the BPE encoder can reach it.  Scores fall with the id.
 * Both files are written atomically.  Exit 0, or 2 on bad arguments, 4 on
 * I/O errors, with a one-line message on stderr.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/checkpoint.h"
#include "engine/model.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/parse.h"

#include "util/banned.h"

#define N_SPECIAL 3
#define N_BYTE 256
#define MAX_PIECE 16

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double uniform(uint64_t *s)
{
	return (double)(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* Approximately N(0, sd): four uniforms have variance 1/3. */
static float gauss(uint64_t *s, double sd)
{
	double x = uniform(s) + uniform(s) + uniform(s) + uniform(s) - 2.0;
	return (float)(x * 1.7320508075688772 * sd);
}

static void fill_ones(float *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = 1.0f;
}

/* Piece number k (0-based) after the byte tokens, into buf; its length. */
static size_t synth_piece(char *buf, size_t k)
{
	size_t len = 0, span = 676, width = 2, start;
	if (k < 95) {
		buf[0] = (char)(32 + k);
		return 1;
	}
	k -= 95;
	/* Words come in pairs: even k without, odd k with a leading space. */
	start = (k & 1) ? 1 : 0;
	k >>= 1;
	while (k >= span && width < MAX_PIECE - 1) {
		k -= span;
		span *= 26;
		width++;
	}
	if (start)
		buf[len++] = ' ';
	for (size_t i = 0; i < width; i++) {
		buf[len + width - 1 - i] = (char)('a' + k % 26);
		k /= 26;
	}
	return len + width;
}

static int append(char *buf, size_t cap, size_t *off, const void *p, size_t n)
{
	if (n > cap - *off)
		return nf_error_set(NF_EINTERNAL, "tokenizer buffer too small");
	memcpy(buf + *off, p, n);
	*off += n;
	return 0;
}

static int write_tokenizer(const char *path, int32_t vocab)
{
	int err = 0;
	char *buf = NULL, piece[MAX_PIECE + 1];
	size_t cap, off = 0;
	int32_t max_len = MAX_PIECE;
	static const char *special[N_SPECIAL] = {"<unk>", "\n<s>\n", "\n</s>\n"};

	/* Each entry: score, length, at most MAX_PIECE bytes. */
	if (!nf_size_mul(&cap, (size_t)vocab, 8 + MAX_PIECE) || !nf_size_add(&cap, cap, 4))
		return nf_error_set(NF_EINPUT, "vocab too large");
	if (!(buf = malloc(cap)))
		return nf_error_set(NF_ENOMEM, "out of memory");
	if ((err = append(buf, cap, &off, &max_len, 4)))
		goto done;
	for (int32_t id = 0; id < vocab; id++) {
		size_t len;
		float score = id < N_SPECIAL + N_BYTE ? 0.0f : (float)(N_SPECIAL + N_BYTE - id);
		int32_t len32;
		if (id < N_SPECIAL) {
			len = strlen(special[id]);
			memcpy(piece, special[id], len);
		} else if (id < N_SPECIAL + N_BYTE) {
			len = (size_t)snprintf(piece, sizeof(piece), "<0x%02X>", id - N_SPECIAL);
		} else {
			len = synth_piece(piece, (size_t)(id - N_SPECIAL - N_BYTE));
		}
		len32 = (int32_t)len;
		if ((err = append(buf, cap, &off, &score, 4)) ||
		    (err = append(buf, cap, &off, &len32, 4)) ||
		    (err = append(buf, cap, &off, piece, len)))
			goto done;
	}
	err = nf_fs_write_atomic(path, buf, off, 0644);
done:
	free(buf);
	return err;
}

static int synth(const char *model_path, const char *tok_path, const nf_model_config *cfg,
		 uint64_t seed)
{
	int err = 0;
	nf_model *m = NULL;
	size_t n_floats, ld;
	float *p;

	if (cfg->vocab_size < N_SPECIAL + N_BYTE)
		return nf_error_set(NF_EINPUT, "--vocab must be at least %d", N_SPECIAL + N_BYTE);
	if ((err = nf_model_alloc(&m, cfg)))
		goto done;
	n_floats = m->mem_len / sizeof(float);
	p = m->mem;
	for (size_t i = 0; i < n_floats; i++)
		p[i] = gauss(&seed, 0.02);
	ld = (size_t)cfg->n_layers * (size_t)cfg->dim;
	fill_ones(m->w.rms_att, ld);
	fill_ones(m->w.rms_ffn, ld);
	fill_ones(m->w.rms_final, (size_t)cfg->dim);
	if ((err = nf_ckpt_write_llama2c(model_path, m)))
		goto done;
	err = write_tokenizer(tok_path, cfg->vocab_size);
done:
	nf_model_free(m);
	return err;
}

static void usage(void)
{
	fprintf(stderr, "usage: nf_synth_model [--dim N] [--hidden N] [--layers N] [--heads N]\n"
			"                      [--kv-heads N] [--vocab N] [--seq N] [--seed N]\n"
			"                      MODEL_OUT TOKENIZER_OUT\n");
}

int main(int argc, char **argv)
{
	nf_model_config cfg = {
		.dim = 768, .hidden_dim = 2048, .n_layers = 12, .n_heads = 12, .n_kv_heads = 12,
		.vocab_size = 32000, .max_seq_len = 1024, .norm_eps = 1e-5f, .rope_theta = 10000.0f,
		.shared_classifier = true,
	};
	uint64_t seed = 20240601;
	const char *pos[2] = {NULL, NULL};
	int npos = 0, err = 0;

	for (int i = 1; i < argc; i++) {
		static const struct {
			const char *flag;
			long max;
		} opts[] = {{"--dim", NF_MODEL_MAX_DIM},       {"--hidden", NF_MODEL_MAX_HIDDEN},
			    {"--layers", NF_MODEL_MAX_LAYERS}, {"--heads", NF_MODEL_MAX_HEADS},
			    {"--kv-heads", NF_MODEL_MAX_HEADS}, {"--vocab", NF_MODEL_MAX_VOCAB},
			    {"--seq", NF_MODEL_MAX_SEQ}};
		int32_t *dst[] = {&cfg.dim,     &cfg.hidden_dim, &cfg.n_layers,   &cfg.n_heads,
				  &cfg.n_kv_heads, &cfg.vocab_size, &cfg.max_seq_len};
		int matched = 0;
		if (strcmp(argv[i], "--seed") == 0) {
			if (i + 1 >= argc) {
				usage();
				return NF_EXIT_INPUT;
			}
			if ((err = nf_parse_u64(&seed, argv[++i], UINT64_MAX, "--seed")))
				goto fail;
			continue;
		}
		for (size_t k = 0; k < sizeof(opts) / sizeof(opts[0]); k++) {
			long v;
			if (strcmp(argv[i], opts[k].flag) != 0)
				continue;
			if (i + 1 >= argc) {
				usage();
				return NF_EXIT_INPUT;
			}
			if ((err = nf_parse_long(&v, argv[++i], 1, opts[k].max, opts[k].flag)))
				goto fail;
			*dst[k] = (int32_t)v;
			matched = 1;
		}
		if (matched)
			continue;
		if (argv[i][0] == '-' || npos == 2) {
			usage();
			return NF_EXIT_INPUT;
		}
		pos[npos++] = argv[i];
	}
	if (npos != 2) {
		usage();
		return NF_EXIT_INPUT;
	}
	if ((err = synth(pos[0], pos[1], &cfg, seed)))
		goto fail;
	printf("nf_synth_model: wrote %s and %s (dim %d, hidden %d, layers %d, heads %d/%d, "
	       "vocab %d, seq %d)\n",
	       pos[0], pos[1], cfg.dim, cfg.hidden_dim, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads,
	       cfg.vocab_size, cfg.max_seq_len);
	return 0;
fail:
	fprintf(stderr, "nf_synth_model: %s\n", nf_error_last());
	return nf_error_exit_status(err);
}
