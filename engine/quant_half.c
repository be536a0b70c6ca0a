/*
 * quant_half.c - float32 weights to IEEE binary16 (NF_QUANT_F16) or
 * bfloat16 (NF_QUANT_BF16), rounded to nearest even by engine/half.c.
 * A weight the format cannot hold (NaN, infinity, or a finite value that
 * rounds past the largest half) is refused rather than stored as an
 * infinity that would poison every activation it touches.
 */
#include "engine/quant.h"

#include <math.h>

#include "engine/safetensors.h"
#include "util/error.h"
#include "util/banned.h"

/* The exponent field all ones: infinity or NaN, in either 16-bit format. */
static int h16_is_special(uint16_t h, nf_quant_kind kind)
{
	if (kind == NF_QUANT_F16)
		return (h & 0x7c00u) == 0x7c00u;
	return (h & 0x7f80u) == 0x7f80u;
}

int nf_quant_h16(uint16_t *h, const float *w, size_t n, nf_quant_kind kind)
{
	if (kind != NF_QUANT_F16 && kind != NF_QUANT_BF16)
		return nf_error_set(NF_EINPUT, "quant: kind %d is not a 16-bit float kind", (int)kind);
	const char *name = kind == NF_QUANT_F16 ? "fp16" : "bf16";
	for (size_t i = 0; i < n; i++) {
		uint16_t v = kind == NF_QUANT_F16 ? nf_f32_to_f16(w[i]) : nf_f32_to_bf16(w[i]);
		if (h16_is_special(v, kind)) {
			if (!isfinite(w[i]))
				return nf_error_set(NF_EINPUT, "element %zu is %s", i,
						    isnan(w[i]) ? "NaN" : "infinite");
			return nf_error_set(NF_EINPUT, "element %zu (%g) overflows %s (max %g)", i,
					    (double)w[i], name,
					    kind == NF_QUANT_F16 ? 65504.0 : 3.3895313892515355e38);
		}
		h[i] = v;
	}
	return 0;
}
