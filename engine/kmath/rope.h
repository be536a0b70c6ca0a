/*
 * rope.h - rotary position embedding, one pair at a time: the inverse
 * frequency of pair j (theta^(-2j/head_size), with Llama 3's scaling of long
 * wavelengths), its angle at a position, which two elements of a head form
 * pair j (interleaved or rotate-half), and the rotation itself.
 * engine/arch.c computes its frequencies and engine/cpu/scalar.c its
 * rotation with these.
 */
#ifndef NF_KMATH_ROPE_H
#define NF_KMATH_ROPE_H

#include "engine/kmath/kmath.h"

/* Which elements of a head pair up. */
typedef enum nf_km_rope_pairs {
	NF_KM_ROPE_INTERLEAVED, /* (2j, 2j + 1): llama2.c, the engine's own layout */
	NF_KM_ROPE_HALVES,      /* (j, j + head_size / 2): Hugging Face's rotate_half */
} nf_km_rope_pairs;

/* theta^(-2j / head_size), in float and powf as the forward pass always
 * computed it (an unscaled model's logits stay bit-identical). */
NF_KM float nf_km_rope_inv_freq(int j, int head_size, float theta)
{
	return 1.0f / powf(theta, (float)(2 * j) / (float)head_size);
}

/* Llama 3: wavelengths longer than orig_ctx / low_freq_factor are stretched
 * by factor, shorter than orig_ctx / high_freq_factor kept, and those between
 * interpolated by how many turns fit the original context. */
NF_KM float nf_km_rope_llama3(float inv, float factor, float low_freq_factor,
			      float high_freq_factor, int orig_ctx)
{
	double wavelen = 2.0 * 3.14159265358979323846 / (double)inv, ctx = (double)orig_ctx;
	double low_wl = ctx / (double)low_freq_factor, high_wl = ctx / (double)high_freq_factor;
	if (wavelen < high_wl)
		return inv;
	if (wavelen > low_wl)
		return (float)((double)inv / (double)factor);
	double smooth = (ctx / wavelen - (double)low_freq_factor) /
			((double)high_freq_factor - (double)low_freq_factor);
	return (float)((1.0 - smooth) * (double)inv / (double)factor + smooth * (double)inv);
}

/* The angle of pair j at position pos. */
NF_KM float nf_km_rope_angle(int pos, float inv_freq) { return nf_km_mul((float)pos, inv_freq); }

/* The offsets in a head of the two elements of pair j. */
NF_KM void nf_km_rope_pair(int *i0, int *i1, nf_km_rope_pairs pairs, int j, int head_size)
{
	if (pairs == NF_KM_ROPE_HALVES) {
		*i0 = j;
		*i1 = j + head_size / 2;
	} else {
		*i0 = 2 * j;
		*i1 = 2 * j + 1;
	}
}

/* (a, b) rotated by the angle of cosine c and sine s, each product and sum
 * rounded once (no FMA), as the CPU rotates. */
NF_KM void nf_km_rope_rotate(float *a, float *b, float c, float s)
{
	float x = *a, y = *b;
	*a = nf_km_sub(nf_km_mul(x, c), nf_km_mul(y, s));
	*b = nf_km_add(nf_km_mul(x, s), nf_km_mul(y, c));
}

#endif
