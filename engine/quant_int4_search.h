/*
 * quant_int4_search.h - the int4 quantizer's grid search (quant_int4.c),
 * written once for a vector of QV_SET floats and included once per vector
 * width: SSE2 (4 lanes, x86-64's baseline) and AVX (8 lanes, where the CPU
 * has it).  A lane is a group: each candidate's sums, solve and score are
 * a handful of vector operations for QV_SET groups at once, where one
 * group alone would wait on each step's latency.  Every lane's arithmetic
 * is the same IEEE operations in the same order whatever the width (the
 * lanes never mix; a set only stops early when no lane has anything left
 * to try), so both widths give the same bits.
 *
 * The includer defines QV (the vector type), QV_SET, QV_FN(name) (a name
 * for this width), QV_ATTR and QV_ATTR_F16C (target attributes), the
 * operations QV_ADD .. QV_MOVEMASK, QV_HALF_ROUND_TRIP (F16C there and
 * back), QV_TRANSPOSE_IN (x[i] = weight i of each lane's source) and
 * QV_STORE_INT (truncate to int32 and store), and q4_dest.
 */

typedef struct QV_FN(q4_set) {
	QV x[Q4_GROUP_MAX]; /* x[i]: weight i of each lane's group */
	size_t n;           /* weights per group */
	QV lo, hi;          /* each group's range */
	int f16c;           /* the CPU converts halves (F16C) */
} QV_FN(q4_set);

/* A candidate grid per lane: its scale and min as the halves stored (as
 * floats), and its squared error. */
typedef struct QV_FN(q4_grid) {
	QV scale, min, err;
} QV_FN(q4_grid);

QV_ATTR static inline QV QV_FN(select)(QV mask, QV a, QV b)
{
	return QV_OR(QV_AND(mask, a), QV_ANDNOT(mask, b));
}

QV_ATTR_F16C static QV QV_FN(round_half_f16c)(QV v)
{
	return QV_HALF_ROUND_TRIP(v);
}

/* Each lane to its nearest IEEE half (ties to even) and back, saturating
 * at +-HALF_MAX: the value stored.  F16C where the CPU has it, the same
 * bits as nf_f32_to_f16. */
QV_ATTR static QV QV_FN(round_half)(const QV_FN(q4_set) *set, QV v)
{
	v = QV_MIN(QV_MAX(v, QV_SET1(-HALF_MAX)), QV_SET1(HALF_MAX));
	if (set->f16c)
		return QV_FN(round_half_f16c)(v);
	float l[QV_SET];
	QV_STORE(l, v);
	for (int k = 0; k < QV_SET; k++)
		l[k] = nf_f16_to_f32(nf_f32_to_f16(l[k]));
	return QV_LOAD(l);
}

/* The levels of one weight per lane on the grid (m, 1 / s): round((x - m)
 * * inv), ties to even (as nf_round_even), clamped to [0, 15]. */
QV_ATTR static inline QV QV_FN(levels)(QV x, QV m, QV inv)
{
	const QV magic = QV_SET1(12582912.0f);
	QV q = QV_SUB(QV_ADD(QV_MUL(QV_SUB(x, m), inv), magic), magic);
	return QV_MIN(QV_MAX(q, QV_ZERO()), QV_SET1((float)Q4_MAX));
}

/* 1 / s where s > 0, else 0 (a grid of one level). */
QV_ATTR static inline QV QV_FN(inverse)(QV s)
{
	return QV_AND(QV_GT(s, QV_ZERO()), QV_DIV(QV_SET1(1.0f), s));
}

/* The squared error of each group on the grid (s, m), each weight on its
 * nearest level and dequantized as the dequantizer does (a product and a
 * sum, rounded apart); even and odd weights summed apart, then added. */
QV_ATTR static QV QV_FN(grid_error)(const QV_FN(q4_set) *set, QV s, QV m)
{
	QV inv = QV_FN(inverse)(s), e0 = QV_ZERO(), e1 = e0;
	size_t i = 0;
	for (; i + 2 <= set->n; i += 2) {
		QV x0 = set->x[i], x1 = set->x[i + 1];
		QV d0 = QV_SUB(QV_ADD(QV_MUL(s, QV_FN(levels)(x0, m, inv)), m), x0);
		QV d1 = QV_SUB(QV_ADD(QV_MUL(s, QV_FN(levels)(x1, m, inv)), m), x1);
		e0 = QV_ADD(e0, QV_MUL(d0, d0));
		e1 = QV_ADD(e1, QV_MUL(d1, d1));
	}
	if (i < set->n) {
		QV d0 = QV_SUB(QV_ADD(QV_MUL(s, QV_FN(levels)(set->x[i], m, inv)), m), set->x[i]);
		e0 = QV_ADD(e0, QV_MUL(d0, d0));
	}
	return QV_ADD(e0, e1);
}

/* The grid (scale, min) rounded to halves, where `valid`, replaces the
 * best of the lanes whose error it lowers. */
QV_ATTR static void QV_FN(consider)(QV_FN(q4_grid) *best, const QV_FN(q4_set) *set, QV scale, QV min, QV valid)
{
	QV s = QV_FN(round_half)(set, scale), m = QV_FN(round_half)(set, min);
	QV err = QV_FN(grid_error)(set, s, m);
	QV better = QV_AND(valid, QV_LT(err, best->err));
	best->scale = QV_FN(select)(better, s, best->scale);
	best->min = QV_FN(select)(better, m, best->min);
	best->err = QV_FN(select)(better, err, best->err);
}

/* Levels q = round(iscale * (x - lo)), then the least-squares scale and min
 * for those levels (the min solved again for the scale as rounded to half),
 * as a candidate where `valid`.  The sums are of x - lo, which keeps the
 * solve's differences small; those of the levels are exact integers. */
QV_ATTR static void QV_FN(consider_levels)(QV_FN(q4_grid) *best, const QV_FN(q4_set) *set, QV lo, QV iscale,
			    QV valid)
{
	/* each sum in two halves (even and odd weights), then added */
	QV z = QV_ZERO(), sq[2] = {z, z}, sqq[2] = {z, z}, sqx[2] = {z, z}, sx[2] = {z, z};
	for (size_t i = 0; i < set->n; i += 2)
		for (size_t h = 0; h < 2 && i + h < set->n; h++) {
			QV x = set->x[i + h], q = QV_FN(levels)(x, lo, iscale), xc = QV_SUB(x, lo);
			sq[h] = QV_ADD(sq[h], q);
			sqq[h] = QV_ADD(sqq[h], QV_MUL(q, q));
			sqx[h] = QV_ADD(sqx[h], QV_MUL(q, xc));
			sx[h] = QV_ADD(sx[h], xc);
		}
	sq[0] = QV_ADD(sq[0], sq[1]), sqq[0] = QV_ADD(sqq[0], sqq[1]);
	sqx[0] = QV_ADD(sqx[0], sqx[1]), sx[0] = QV_ADD(sx[0], sx[1]);
	QV n = QV_SET1((float)set->n);
	QV det = QV_SUB(QV_MUL(n, sqq[0]), QV_MUL(sq[0], sq[0]));
	QV scale = QV_DIV(QV_SUB(QV_MUL(n, sqx[0]), QV_MUL(sq[0], sx[0])), det);
	valid = QV_AND(valid, QV_AND(QV_GT(det, z), QV_GT(scale, z)));
	if (!QV_MOVEMASK(valid))
		return;
	QV hs = QV_FN(round_half)(set, scale);
	QV min = QV_ADD(lo, QV_DIV(QV_SUB(sx[0], QV_MUL(hs, sq[0])), n));
	QV_FN(consider)(best, set, hs, min, valid);
}

/* Each lane's best stored (scale, min): plain min/max, then the levels of a
 * few candidate scales around it, each scored by its squared error with
 * the halves actually stored, then Lloyd steps from the best. */
QV_ATTR static QV_FN(q4_grid) QV_FN(fit_set)(const QV_FN(q4_set) *set)
{
	const QV all = QV_ALL_ONES();
	QV lo = set->lo, range = QV_SUB(set->hi, set->lo);
	QV_FN(q4_grid) best = {QV_ZERO(), QV_ZERO(), QV_SET1(INFINITY)};
	QV_FN(consider)(&best, set, QV_DIV(range, QV_SET1((float)Q4_MAX)), lo, all);
	QV spread = QV_GT(range, QV_ZERO());
	for (int k = -SEARCH_STEPS; k <= SEARCH_STEPS; k++) {
		float levels = (float)Q4_MAX + SEARCH_SPAN * (float)k / (float)SEARCH_STEPS;
		QV_FN(consider_levels)(&best, set, lo, QV_DIV(QV_SET1(levels), range), spread);
	}
	/* refine as Lloyd's algorithm does: the levels of the stored grid,
	 * their least-squares grid, while the error falls */
	QV active = all;
	for (int it = 0; it < REFINE_STEPS; it++) {
		active = QV_AND(active, QV_GT(best.scale, QV_ZERO()));
		if (!QV_MOVEMASK(active))
			break;
		QV before = best.err;
		QV_FN(consider_levels)(&best, set, best.min, QV_FN(inverse)(best.scale), active);
		active = QV_AND(active, QV_LT(best.err, before));
	}
	return best;
}

/* Load the groups at src[0, QV_SET) (n weights each) into the lanes. */
QV_ATTR static void QV_FN(load_set)(QV_FN(q4_set) *set, const float *const src[QV_SET], size_t n)
{
	set->n = n;
	QV_TRANSPOSE_IN(set->x, src, n);
	size_t i;
	set->lo = set->hi = set->x[0];
	for (i = 1; i < n; i++) {
		set->lo = QV_MIN(set->lo, set->x[i]);
		set->hi = QV_MAX(set->hi, set->x[i]);
	}
}

/* Store the lanes [0, used) of a fitted set: the halves, and each group's
 * levels, computed again from its own weights (src[k], contiguous) with
 * the lane's grid and packed a block at a time (pack_group). */
QV_ATTR static void QV_FN(store_set)(const QV_FN(q4_set) *set, const QV_FN(q4_grid) *best,
				     const float *const src[QV_SET], const q4_dest *dest, int used)
{
	float s[QV_SET], m[QV_SET], inv[QV_SET];
	QV_STORE(s, best->scale);
	QV_STORE(m, best->min);
	QV_STORE(inv, QV_FN(inverse)(best->scale));
	for (int k = 0; k < used; k++) {
		dest[k].sm[0] = nf_f32_to_f16(s[k]); /* halves already: exact */
		dest[k].sm[1] = nf_f32_to_f16(m[k]);
		pack_group(dest[k].row, dest[k].c0, src[k], set->n, m[k], inv[k]);
	}
}

/* The groups of columns [c0, c0 + n) of every row, QV_SET at a time (a
 * last set short of lanes repeats its last group and stores only its
 * own). */
QV_ATTR static void QV_FN(quantize_column_groups)(uint8_t *q4, uint16_t *gsm, const float *w, size_t rows,
				   size_t cols, int group, size_t g_first, size_t g_count, size_t n,
				   QV_FN(q4_set) *set)
{
	size_t groups = nf_quant_int4_groups(cols, group), rb = nf_quant_int4_row_bytes(cols);
	size_t total = rows * g_count;
	for (size_t t0 = 0; t0 < total; t0 += QV_SET) {
		const float *src[QV_SET];
		q4_dest dest[QV_SET];
		int used = total - t0 < QV_SET ? (int)(total - t0) : QV_SET;
		for (int k = 0; k < QV_SET; k++) {
			size_t t = t0 + (size_t)(k < used ? k : used - 1);
			size_t r = t / g_count, g = g_first + t % g_count;
			src[k] = w + r * cols + g * (size_t)group;
			dest[k] = (q4_dest){q4 + r * rb, g * (size_t)group, gsm + (r * groups + g) * 2};
		}
		QV_FN(load_set)(set, src, n);
		QV_FN(q4_grid) best = QV_FN(fit_set)(set);
		QV_FN(store_set)(set, &best, src, dest, used);
	}
}


/* Every group of the matrix: the whole groups of every row, then each
 * row's short last group.  The set (the weights of a set's groups, laid
 * out for aligned vector loads) is the one allocation. */
QV_ATTR static int QV_FN(quantize_matrix)(uint8_t *q4, uint16_t *gsm, const float *w, size_t rows,
					  size_t cols, int group, int f16c)
{
	size_t whole = cols / (size_t)group, rest = cols % (size_t)group;
	QV_FN(q4_set) *set = aligned_alloc(64, (sizeof *set + 63) / 64 * 64);
	if (!set)
		return nf_error_set(NF_ENOMEM, "int4: out of memory");
	set->f16c = f16c;
	if (whole)
		QV_FN(quantize_column_groups)(q4, gsm, w, rows, cols, group, 0, whole, (size_t)group, set);
	if (rest)
		QV_FN(quantize_column_groups)(q4, gsm, w, rows, cols, group, whole, 1, rest, set);
	free(set);
	return 0;
}
