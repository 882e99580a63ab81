/*
 * The window attention of a few decoder queries (layer_attend), written
 * once for the two ways K and V are stored: attend.c includes it for
 * floats, attend-f16.c for IEEE binary16 widened as it is read. The
 * includer defines
 *
 *   AW_ELEM		the element type of K and V
 *   AW_LOAD8(x)	8 of them from x as a v8 of floats
 *   AW_VALUE(x)	one of them as a float
 *   AW_MADD8(a, b, c)	c + a b of v8s (fused or not, as the includer's
 *			floats have always been made)
 *   AW_MADD(a, b, c)	the same of floats
 *   AW_ATTR		the target of the functions (none: inlined into the
 *			includer's target_clones, each clone compiles them
 *			for its own target; a function not inlined would
 *			be compiled once, for plain x86-64)
 *   AW_NAME(x)		a helper's name, unique to the includer
 *
 * and then defines the public function as a call of AW_NAME(attend).
 * The vector type and its macros below are the includer's too (attend.c's
 * self-attention uses them).
 */

typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4)));

/* macros: a function taking or returning a v8 changes the default ABI */
#define ld8(x)		(*(const v8u *)(x))
#define bcast8(x)	((v8){ (x), (x), (x), (x), (x), (x), (x), (x) })
#define hsum8(a)	((((a)[0] + (a)[4]) + ((a)[2] + (a)[6])) + \
			    (((a)[1] + (a)[5]) + ((a)[3] + (a)[7])))

#define AW_FN	AW_ATTR static inline __attribute__((always_inline))

/* keys a pass: 8 rows of K or V, 8 KB, and the queries' 1 KB each in L1 */
#define AW_CHUNK	256

/*
 * The scores of one query: p[t] += sum over 8 channels c of q[c] k[c][t],
 * added channel by channel in order, as a loop over one channel at a
 * time adds them (the same floats), with p loaded and stored once per 8
 * channels instead of once per channel: the one-channel loop was bound
 * by those stores.
 */
AW_FN void
AW_NAME(scores8)(const float *qs, const AW_ELEM *k, int ldk, int n, float *p)
{
	const AW_ELEM *k0 = k, *k1 = k0 + ldk, *k2 = k1 + ldk;
	const AW_ELEM *k3 = k2 + ldk, *k4 = k3 + ldk, *k5 = k4 + ldk;
	const AW_ELEM *k6 = k5 + ldk, *k7 = k6 + ldk;
	v8 q0 = bcast8(qs[0]), q1 = bcast8(qs[1]), q2 = bcast8(qs[2]);
	v8 q3 = bcast8(qs[3]), q4 = bcast8(qs[4]), q5 = bcast8(qs[5]);
	v8 q6 = bcast8(qs[6]), q7 = bcast8(qs[7]), s;
	int t, i;

	for (t = 0; t + 8 <= n; t += 8) {
		s = AW_MADD8(q0, AW_LOAD8(k0 + t), ld8(p + t));
		s = AW_MADD8(q1, AW_LOAD8(k1 + t), s);
		s = AW_MADD8(q2, AW_LOAD8(k2 + t), s);
		s = AW_MADD8(q3, AW_LOAD8(k3 + t), s);
		s = AW_MADD8(q4, AW_LOAD8(k4 + t), s);
		s = AW_MADD8(q5, AW_LOAD8(k5 + t), s);
		s = AW_MADD8(q6, AW_LOAD8(k6 + t), s);
		*(v8u *)(p + t) = AW_MADD8(q7, AW_LOAD8(k7 + t), s);
	}
	for (; t < n; t++)
		for (i = 0; i < 8; i++)
			p[t] = AW_MADD(qs[i], AW_VALUE(k[(size_t)i * ldk + t]),
			    p[t]);
}

/*
 * The weighted sums sum_t p[t] V[c][t] of 8 channels (rows ldk apart)
 * over keys [t0, t1), a multiple of 8 apart, carried in acc[8]: lane l
 * of a sum adds the keys t = l (mod 8) in order, so that a sum split
 * into parts is the same float as one pass (finish_sum adds the lanes
 * and the keys past the last whole vector). Eight sums in flight: one at
 * a time waited on its own additions (5 beams' cross-attention of tiny.en
 * took 2.05 ms against 1.73, AVX-512, 1 thread, least of 30; four
 * against eight 2.44 against 1.87, AVX2, Zen 3).
 */
AW_FN void
AW_NAME(weighted8)(const float *p, const AW_ELEM *v, int ldk, int t0, int t1,
    v8 *acc)
{
	const AW_ELEM *v0 = v, *v1 = v0 + ldk, *v2 = v1 + ldk;
	const AW_ELEM *v3 = v2 + ldk, *v4 = v3 + ldk, *v5 = v4 + ldk;
	const AW_ELEM *v6 = v5 + ldk, *v7 = v6 + ldk;
	v8 a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
	v8 a4 = acc[4], a5 = acc[5], a6 = acc[6], a7 = acc[7], pt;
	int t;

	for (t = t0; t < t1; t += 8) {
		pt = ld8(p + t);
		a0 = AW_MADD8(pt, AW_LOAD8(v0 + t), a0);
		a1 = AW_MADD8(pt, AW_LOAD8(v1 + t), a1);
		a2 = AW_MADD8(pt, AW_LOAD8(v2 + t), a2);
		a3 = AW_MADD8(pt, AW_LOAD8(v3 + t), a3);
		a4 = AW_MADD8(pt, AW_LOAD8(v4 + t), a4);
		a5 = AW_MADD8(pt, AW_LOAD8(v5 + t), a5);
		a6 = AW_MADD8(pt, AW_LOAD8(v6 + t), a6);
		a7 = AW_MADD8(pt, AW_LOAD8(v7 + t), a7);
	}
	acc[0] = a0;
	acc[1] = a1;
	acc[2] = a2;
	acc[3] = a3;
	acc[4] = a4;
	acc[5] = a5;
	acc[6] = a6;
	acc[7] = a7;
}

/* As weighted8, one channel. */
AW_FN void
AW_NAME(weighted1)(const float *p, const AW_ELEM *v, int t0, int t1, v8 *acc)
{
	v8 a = *acc;
	int t;

	for (t = t0; t < t1; t += 8)
		a = AW_MADD8(ld8(p + t), AW_LOAD8(v + t), a);
	*acc = a;
}

/* A sum of weighted8 or weighted1 (keys up to n8) and keys n8 .. n - 1. */
AW_FN float
AW_NAME(finish_sum)(const v8 *acc, const float *p, const AW_ELEM *v, int n8,
    int n)
{
	float s = hsum8(*acc);
	int t;

	for (t = n8; t < n; t++)
		s = AW_MADD(p[t], AW_VALUE(v[t]), s);
	return s;
}

/* p = scale q.K of one query (p zero on entry). */
AW_FN void
AW_NAME(scores)(const float *q, int ldq, const AW_ELEM *k, int ldk, int n,
    int dh, float scale, float *p)
{
	float qs[8];
	int c, t, i, t0, len;

	for (c = 0; c + 8 <= dh; c += 8) {
		for (i = 0; i < 8; i++)
			qs[i] = q[(size_t)(c + i) * ldq] * scale;
		for (t0 = 0; t0 < n; t0 += AW_CHUNK) {
			len = n - t0 < AW_CHUNK ? n - t0 : AW_CHUNK;
			AW_NAME(scores8)(qs, k + (size_t)c * ldk + t0, ldk,
			    len, p + t0);
		}
	}
	for (; c < dh; c++) {
		const AW_ELEM *kr = k + (size_t)c * ldk;
		float qc = q[(size_t)c * ldq] * scale;

		for (t = 0; t < n; t++)
			p[t] = AW_MADD(qc, AW_VALUE(kr[t]), p[t]);
	}
}

/*
 * One query (a greedy step) against the n keys of one head: 8 rows of
 * AW_CHUNK keys at a time, each 8 channels' sums in flight together.
 * attend_blk gives one query the same floats, but its weighted sums wait
 * on two chains: base's 48 heads took 0.44 ms there against 0.38 here
 * (AVX2, 2 threads).
 */
AW_FN void
AW_NAME(attend1)(const float *q, int ldq, const AW_ELEM *k, const AW_ELEM *v,
    int ldk, int n, int dh, float scale, float *out, int ldo, float *p)
{
	v8 acc[8];
	int n8 = n / 8 * 8, c, t, t0, t1, r, rows;

	for (t = 0; t < n; t++)
		p[t] = 0.0f;
	AW_NAME(scores)(q, ldq, k, ldk, n, dh, scale, p);
	layer_softmax(p, n);
	for (c = 0; c < dh; c += rows) {
		rows = dh - c >= 8 ? 8 : 1;
		memset(acc, 0, sizeof(acc));
		for (t0 = 0; t0 < n8; t0 = t1) {
			t1 = n8 - t0 < AW_CHUNK ? n8 : t0 + AW_CHUNK;
			if (rows == 8)
				AW_NAME(weighted8)(p, v + (size_t)c * ldk, ldk,
				    t0, t1, acc);
			else
				AW_NAME(weighted1)(p, v + (size_t)c * ldk, t0,
				    t1, acc);
		}
		for (r = 0; r < rows; r++)
			out[(size_t)(c + r) * ldo] = AW_NAME(finish_sum)(
			    &acc[r], p, v + (size_t)(c + r) * ldk, n8, n);
	}
}

/*
 * A block of queries (a beam search's 5) in one pass over the keys, so
 * that each 8 of K or V is loaded (and, for binary16, widened) once for
 * all of them instead of once per query: 5 beams' cross-attention of
 * base was bound by those loads and widenings, not by memory. Each
 * query's sums are the ones attend makes alone (the same operations in
 * the same order), so its floats do not depend on the others.
 */
#define AW_QB		5	/* queries a block: 10 sums in 16 registers */

/*
 * Scores of nqb (a constant) queries over the keys [t, t + 8 nv) of 8
 * channels: p[j][t] += qs[c][j] k[c][t] for c in order, p held in
 * registers across the 8 (nv 2: 10 sums, 2 keys and a query's value).
 */
AW_FN void
AW_NAME(scores_tile)(const float *qs, const AW_ELEM *k, int ldk, int t,
    const int nqb, const int nv, float *p, int n)
{
	v8 a[AW_QB][2], k0, k1 = { 0 }, qb;
	int c, j;

	for (j = 0; j < nqb; j++) {
		a[j][0] = ld8(p + (size_t)j * n + t);
		if (nv == 2)
			a[j][1] = ld8(p + (size_t)j * n + t + 8);
	}
	for (c = 0; c < 8; c++) {
		k0 = AW_LOAD8(k + (size_t)c * ldk + t);
		if (nv == 2)
			k1 = AW_LOAD8(k + (size_t)c * ldk + t + 8);
		for (j = 0; j < nqb; j++) {
			qb = bcast8(qs[c * AW_QB + j]);
			a[j][0] = AW_MADD8(qb, k0, a[j][0]);
			if (nv == 2)
				a[j][1] = AW_MADD8(qb, k1, a[j][1]);
		}
	}
	for (j = 0; j < nqb; j++) {
		*(v8u *)(p + (size_t)j * n + t) = a[j][0];
		if (nv == 2)
			*(v8u *)(p + (size_t)j * n + t + 8) = a[j][1];
	}
}

/* scores (below) of a block of nqb queries, 8 channels at a time */
AW_FN void
AW_NAME(scores_blk)(const float *q, int ldq, const int nqb, const AW_ELEM *k,
    int ldk, int n, int dh, float scale, float *p)
{
	float qs[8 * AW_QB];
	int c, t, j, i, t0, t1;

	for (c = 0; c + 8 <= dh; c += 8) {
		for (i = 0; i < 8; i++)
			for (j = 0; j < nqb; j++)
				qs[i * AW_QB + j] = q[(size_t)(c + i) * ldq +
				    j] * scale;
		for (t0 = 0; t0 < n; t0 = t1) {
			t1 = n - t0 < AW_CHUNK ? n : t0 + AW_CHUNK;
			for (t = t0; t + 16 <= t1; t += 16)
				AW_NAME(scores_tile)(qs, k + (size_t)c * ldk,
				    ldk, t, nqb, 2, p, n);
			for (; t + 8 <= t1; t += 8)
				AW_NAME(scores_tile)(qs, k + (size_t)c * ldk,
				    ldk, t, nqb, 1, p, n);
			for (; t < t1; t++)
				for (j = 0; j < nqb; j++)
					for (i = 0; i < 8; i++)
						p[(size_t)j * n + t] = AW_MADD(
						    qs[i * AW_QB + j], AW_VALUE(
						    k[(size_t)(c + i) * ldk +
						    t]), p[(size_t)j * n + t]);
		}
	}
	for (; c < dh; c++) {
		const AW_ELEM *kr = k + (size_t)c * ldk;

		for (j = 0; j < nqb; j++) {
			float qc = q[(size_t)c * ldq + j] * scale, *pj = p +
			    (size_t)j * n;

			for (t = 0; t < n; t++)
				pj[t] = AW_MADD(qc, AW_VALUE(kr[t]), pj[t]);
		}
	}
}

/*
 * The weighted sums of 2 channels (rows ldk apart) for nqb queries over
 * the keys [0, n8), into acc[j][r]: as weighted8, each lane's keys in
 * order, with each 8 of V loaded once for all the queries.
 */
AW_FN void
AW_NAME(weighted_blk)(const float *p, int n, const int nqb, const AW_ELEM *v,
    int ldk, int n8, v8 acc[][8])
{
	v8 a[AW_QB][2], v0, v1, pt;
	int t, j;

	for (j = 0; j < nqb; j++)
		a[j][0] = a[j][1] = (v8){ 0 };
	for (t = 0; t < n8; t += 8) {
		v0 = AW_LOAD8(v + t);
		v1 = AW_LOAD8(v + ldk + t);
		for (j = 0; j < nqb; j++) {
			pt = ld8(p + (size_t)j * n + t);
			a[j][0] = AW_MADD8(pt, v0, a[j][0]);
			a[j][1] = AW_MADD8(pt, v1, a[j][1]);
		}
	}
	for (j = 0; j < nqb; j++) {
		acc[j][0] = a[j][0];
		acc[j][1] = a[j][1];
	}
}

/* attend (below) of a block of nqb (2 .. AW_QB, a constant) queries */
AW_FN void
AW_NAME(attend_blk)(const float *q, int ldq, const int nqb, const AW_ELEM *k,
    const AW_ELEM *v, int ldk, int n, int dh, float scale, float *out,
    int ldo, float *p)
{
	v8 acc[AW_QB][8];
	int n8 = n / 8 * 8, c, t, j, r, rows;

	for (t = 0; t < nqb * n; t++)
		p[t] = 0.0f;
	AW_NAME(scores_blk)(q, ldq, nqb, k, ldk, n, dh, scale, p);
	for (j = 0; j < nqb; j++)
		layer_softmax(p + (size_t)j * n, n);
	for (c = 0; c < dh; c += rows) {
		rows = dh - c >= 2 ? 2 : 1;
		if (rows == 2)
			AW_NAME(weighted_blk)(p, n, nqb, v + (size_t)c * ldk,
			    ldk, n8, acc);
		else
			for (j = 0; j < nqb; j++) {
				acc[j][0] = (v8){ 0 };
				AW_NAME(weighted1)(p + (size_t)j * n, v +
				    (size_t)c * ldk, 0, n8, &acc[j][0]);
			}
		for (r = 0; r < rows; r++)
			for (j = 0; j < nqb; j++)
				out[(size_t)(c + r) * ldo + j] =
				    AW_NAME(finish_sum)(&acc[j][r], p +
				    (size_t)j * n, v + (size_t)(c + r) * ldk,
				    n8, n);
	}
}

/*
 * nq queries (consecutive columns of q, channel stride ldq) against the
 * same n keys of one head, channels-first: p = softmax(scale q.K),
 * out[c * ldo + j] = sum_t p[j][t] V[c][t]. K and V are [dh][ldk] and are
 * read once for each block of up to AW_QB queries (they do not fit in
 * cache for long windows), a query left alone by attend1. Each query's
 * floats are the same whatever queries are beside it. p is nq * n floats
 * of scratch.
 */
AW_FN void
AW_NAME(attend)(const float *q, int ldq, int nq, const AW_ELEM *k,
    const AW_ELEM *v, int ldk, int n, int dh, float scale, float *out,
    int ldo, float *p)
{
	int j, nb;

	for (j = 0; j < nq; j += nb) {
		nb = nq - j < AW_QB ? nq - j : AW_QB;
		switch (nb) {
#define AW_BLK(b) case b: AW_NAME(attend_blk)(q + j, ldq, b, k, v, ldk, n, \
			    dh, scale, out + j, ldo, p); break
		AW_BLK(2);
		AW_BLK(3);
		AW_BLK(4);
		AW_BLK(5);
#undef AW_BLK
		default:
			AW_NAME(attend1)(q + j, ldq, k, v, ldk, n, dh, scale,
			    out + j, ldo, p);
		}
	}
}

#undef AW_CHUNK
#undef AW_QB
#undef AW_FN
