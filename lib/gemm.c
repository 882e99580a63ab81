/*
 * Matrix products: the kernel for each (gemm.h), or oneDNN.
 *
 * Design: the engine's shapes are static (1500 encoder positions, a few
 * decoder widths), so each distinct bf16 product gets one matmul primitive,
 * created on first use and kept for the life of the model. Creating one
 * costs milliseconds; running a small one costs microseconds. fp32 goes
 * through dnnl_sgemm, which needs no primitive and dispatches to the best
 * ISA itself.
 */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "err.h"
#include "amx.h"
#include "gemm.h"
#include "gemm-win.h"
#include "gemv.h"
#include "layers.h"

/* One bf16 product C[m][n] = A[m][k] B[k][n] with strides (rows, cols). */
struct gemm_prim {
	int m, k, n;
	int64_t sa0, sa1, sb0, sb1, ldc;
	int accumulate;
	dnnl_primitive_t prim;
	dnnl_memory_t src, wei, dst;
};

struct gemm {
	enum sotto_precision precision;
	dnnl_engine_t engine;
	dnnl_stream_t stream;
	struct gemm_prim *prims;	/* owned */
	size_t n_prims, cap_prims;
	uint16_t *xbuf;			/* bf16 copy of the current x */
	size_t xbuf_len;		/* bytes */
	int amx;			/* gemv may use tile products */
	uint16_t *gemv_scratch;		/* owned, gemv_len bytes */
	size_t gemv_len;
	uint16_t *win_scratch;		/* owned, win_len bytes */
	size_t win_len;
	uint16_t *i8_bf16;		/* owned: an int8 weight as bf16 */
	size_t i8_len;
	uint16_t *i8w_scratch;		/* owned: gemm-i8.c's X */
	size_t i8w_len;
};

static int
cpu_has_bf16(void)
{
	dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();

	return ((isa & dnnl_cpu_isa_avx512_core_bf16) ==
	    dnnl_cpu_isa_avx512_core_bf16);
}

static int
cpu_has_amx(void)
{
	dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();

	return ((isa & dnnl_cpu_isa_avx512_core_amx) ==
	    dnnl_cpu_isa_avx512_core_amx);
}

int
gemm_pick_precision(enum sotto_precision want, enum sotto_precision *ret,
    char *err)
{
	if (want == SOTTO_PRECISION_FP32) {
		*ret = SOTTO_PRECISION_FP32;
		return 0;
	}
	if (cpu_has_bf16()) {
		*ret = SOTTO_PRECISION_BF16;
		return 0;
	}
	if (want == SOTTO_PRECISION_BF16)
		return err_set(err, SOTTO_EINVAL, "precision bf16: this CPU "
		    "has neither AMX nor AVX512-BF16; use fp32 or auto");
	*ret = SOTTO_PRECISION_FP32;
	return 0;
}

int
gemm_new(enum sotto_precision precision, struct gemm **ret, char *err)
{
	struct gemm *g;

	if ((g = calloc(1, sizeof(*g))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	g->precision = precision;
	g->amx = precision == SOTTO_PRECISION_BF16 && cpu_has_amx() &&
	    gemv_amx_init();
	if (dnnl_engine_create(&g->engine, dnnl_cpu, 0) != dnnl_success ||
	    dnnl_stream_create(&g->stream, g->engine,
	    dnnl_stream_default_flags) != dnnl_success) {
		gemm_free(g);
		return err_set(err, SOTTO_ECOMPUTE, "oneDNN: cannot create "
		    "a CPU engine");
	}
	*ret = g;
	return 0;
}

int
gemm_has_amx(const struct gemm *g)
{
	return g->amx;
}

enum sotto_precision
gemm_precision(const struct gemm *g)
{
	return g->precision;
}

void
gemm_free(struct gemm *g)
{
	size_t i;

	if (g == NULL)
		return;
	for (i = 0; i < g->n_prims; i++) {
		dnnl_primitive_destroy(g->prims[i].prim);
		dnnl_memory_destroy(g->prims[i].src);
		dnnl_memory_destroy(g->prims[i].wei);
		dnnl_memory_destroy(g->prims[i].dst);
	}
	free(g->prims);
	free(g->xbuf);
	free(g->gemv_scratch);
	free(g->i8_bf16);
	free(g->i8w_scratch);
	free(g->win_scratch);
	if (g->stream != NULL)
		dnnl_stream_destroy(g->stream);
	if (g->engine != NULL)
		dnnl_engine_destroy(g->engine);
	free(g);
}

static int
dnnl_failed(dnnl_status_t s, const char *what, char *err)
{
	return err_set(err, SOTTO_ECOMPUTE, "oneDNN %s failed (status %d)",
	    what, (int)s);
}

/*
 * Make *buf hold at least need bytes (64-byte aligned), keeping it when it
 * already does: the shapes are static, so this allocates on first use.
 */
static int
scratch_reserve(uint16_t **buf, size_t *len, size_t need, char *err)
{
	if (need <= *len)
		return 0;
	free(*buf);
	*buf = aligned_alloc(64, (need + 63) & ~(size_t)63);
	*len = *buf == NULL ? 0 : need;
	if (*buf == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	return 0;
}

/*
 * A packed weight over more than a block's columns: a window product
 * (gemm-win.h) on AMX or by AVX512-BF16 dot products.
 */
static int
use_win_gemm(const struct gemm *g, const struct mat *w, int n, int ldy)
{
	return w->packed != NULL && g->precision == SOTTO_PRECISION_BF16 &&
	    n > 16 && win_gemm_fits(w->rows, w->cols, n, ldy, g->amx);
}

/* Convert x [k][n] (row stride ldx) to a contiguous bf16 [k][n]. */
static int
gemm_x_to_bf16(struct gemm *g, const float *x, int ldx, int k, int n,
    char *err)
{
	size_t need = (size_t)k * n;
	int i, rc;

	if ((rc = scratch_reserve(&g->xbuf, &g->xbuf_len, need * 2,
	    err)) != 0)
		return rc;
#pragma omp parallel for schedule(static) if (need > 65536)
	for (i = 0; i < k; i++)
		layer_to_bf16(x + (size_t)i * ldx, g->xbuf + (size_t)i * n, n);
	return 0;
}


static int
md_2d(dnnl_memory_desc_t *md, int64_t d0, int64_t d1, int64_t s0, int64_t s1,
    dnnl_data_type_t dt)
{
	dnnl_dims_t dims = { d0, d1 }, strides = { s0, s1 };

	return dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides) ==
	    dnnl_success ? 0 : -1;
}

/* Build the matmul primitive for one shape and set of strides. */
static int
prim_create(struct gemm *g, struct gemm_prim *p, char *err)
{
	dnnl_memory_desc_t src, wei, dst;
	dnnl_matmul_desc_t desc;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t ops = NULL;
	dnnl_primitive_desc_t pd = NULL;
	dnnl_status_t s;

	if (md_2d(&src, p->m, p->k, p->sa0, p->sa1, dnnl_bf16) ||
	    md_2d(&wei, p->k, p->n, p->sb0, p->sb1, dnnl_bf16) ||
	    md_2d(&dst, p->m, p->n, p->ldc, 1, dnnl_f32))
		return err_set(err, SOTTO_ECOMPUTE, "oneDNN: bad shape "
		    "%dx%dx%d", p->m, p->k, p->n);
	if ((s = dnnl_matmul_desc_init(&desc, &src, &wei, NULL, &dst)) !=
	    dnnl_success)
		return dnnl_failed(s, "matmul descriptor", err);
	if ((s = dnnl_primitive_attr_create(&attr)) != dnnl_success)
		return dnnl_failed(s, "attribute", err);
	if (p->accumulate) {
		dnnl_post_ops_create(&ops);
		dnnl_post_ops_append_sum(ops, 1.0f);
		dnnl_primitive_attr_set_post_ops(attr, ops);
		dnnl_post_ops_destroy(ops);
	}
	s = dnnl_primitive_desc_create(&pd, &desc, attr, g->engine, NULL);
	dnnl_primitive_attr_destroy(attr);
	if (s != dnnl_success)
		return dnnl_failed(s, "matmul primitive descriptor", err);
	s = dnnl_primitive_create(&p->prim, pd);
	if (s == dnnl_success)
		s = dnnl_memory_create(&p->src, &src, g->engine, NULL);
	if (s == dnnl_success)
		s = dnnl_memory_create(&p->wei, &wei, g->engine, NULL);
	if (s == dnnl_success)
		s = dnnl_memory_create(&p->dst, &dst, g->engine, NULL);
	dnnl_primitive_desc_destroy(pd);
	if (s != dnnl_success)
		return dnnl_failed(s, "matmul primitive", err);
	return 0;
}

static int
prim_get(struct gemm *g, const struct gemm_prim *key, struct gemm_prim **ret,
    char *err)
{
	struct gemm_prim *p;
	size_t i;
	int rc;

	for (i = 0; i < g->n_prims; i++) {
		p = &g->prims[i];
		if (p->m == key->m && p->k == key->k && p->n == key->n &&
		    p->sa0 == key->sa0 && p->sa1 == key->sa1 &&
		    p->sb0 == key->sb0 && p->sb1 == key->sb1 &&
		    p->ldc == key->ldc && p->accumulate == key->accumulate) {
			*ret = p;
			return 0;
		}
	}
	if (g->n_prims == g->cap_prims) {
		size_t cap = g->cap_prims ? 2 * g->cap_prims : 32;

		p = realloc(g->prims, cap * sizeof(*p));
		if (p == NULL)
			return err_set(err, SOTTO_ENOMEM, "out of memory");
		g->prims = p;
		g->cap_prims = cap;
	}
	p = &g->prims[g->n_prims];
	*p = *key;
	p->prim = NULL;
	p->src = p->wei = p->dst = NULL;
	if ((rc = prim_create(g, p, err)) != 0) {
		dnnl_primitive_destroy(p->prim);
		dnnl_memory_destroy(p->src);
		dnnl_memory_destroy(p->wei);
		dnnl_memory_destroy(p->dst);
		return rc;
	}
	g->n_prims++;
	*ret = p;
	return 0;
}

static int
prim_run(struct gemm *g, struct gemm_prim *p, const void *src,
    const void *wei, float *dst, char *err)
{
	dnnl_exec_arg_t args[3];
	dnnl_status_t s;

	dnnl_memory_set_data_handle(p->src, (void *)src);
	dnnl_memory_set_data_handle(p->wei, (void *)wei);
	dnnl_memory_set_data_handle(p->dst, dst);
	args[0] = (dnnl_exec_arg_t){ DNNL_ARG_SRC, p->src };
	args[1] = (dnnl_exec_arg_t){ DNNL_ARG_WEIGHTS, p->wei };
	args[2] = (dnnl_exec_arg_t){ DNNL_ARG_DST, p->dst };
	if ((s = dnnl_primitive_execute(p->prim, g->stream, 3, args)) !=
	    dnnl_success)
		return dnnl_failed(s, "matmul", err);
	return 0;
}

/* Run the cached primitive for this shape on bf16 a, b into f32 c. */
static int
gemm_run_bf16(struct gemm *g, const struct gemm_prim *key, const void *a,
    const void *b, float *c, char *err)
{
	struct gemm_prim *p = NULL;
	int rc;

	if ((rc = prim_get(g, key, &p, err)) != 0)
		return rc;
	return prim_run(g, p, a, b, c, err);
}

/*
 * fp32: products of few columns (or any, once the f32 copy is dropped)
 * read the F16 rows.
 */
static int
use_f16(const struct gemm *g, const struct mat *w, int n)
{
	return g->precision != SOTTO_PRECISION_BF16 && w->f16 != NULL &&
	    (n <= GEMV_F16_COLS || w->f32 == NULL);
}

/*
 * Products of a few columns: packed bf16 weights (gemv.c), or in fp32 the
 * F16 rows (gemv-f16.c).
 */
static int
gemm_few(struct gemm *g, const struct mat *w, const float *x, int ldx,
    int n, float *y, ptrdiff_t ym, ptrdiff_t yj, int accumulate, char *err)
{
	int fp32 = g->precision != SOTTO_PRECISION_BF16;
	struct gemv_args a = { 0 };
	int rc;

	if ((rc = scratch_reserve(&g->gemv_scratch, &g->gemv_len, fp32 ?
	    GEMV_F16_SCRATCH(w->cols) * sizeof(float) :
	    GEMV_SCRATCH_BYTES(w->cols), err)) != 0)
		return rc;
	a.wp = fp32 ? w->f16 : w->packed;
	a.rows = w->rows;
	a.k = w->cols;
	a.x = x;
	a.ldx = ldx;
	a.n = n;
	a.y = y;
	a.ym = ym;
	a.yj = yj;
	a.accumulate = accumulate;
	a.amx = g->amx;
	if (fp32)
		gemv_f16(&a, (float *)g->gemv_scratch);
	else
		gemv_bf16(&a, g->gemv_scratch);
	return 0;
}

/* Precision int8's encoder: y = W x + b over the window (gemm-i8.c). */
static int
i8_win_run(struct gemm *g, const struct mat *w, const float *x, int ldx,
    int n, float *y, int ldy, const float *bias, int flags, char *err)
{
	struct i8_win p = { 0 };
	int rc;

	if ((rc = scratch_reserve(&g->i8w_scratch, &g->i8w_len,
	    i8_win_scratch_bytes(w->cols, n), err)) != 0)
		return rc;
	if (flags & GEMM_GELU_X)
		layer_gelu((float *)x, w->cols, n, ldx);
	p.w = w->i8;
	p.scale = w->i8_scale;
	p.rowsum = w->i8_rowsum;
	p.m = w->rows;
	p.k = w->cols;
	p.n = n;
	p.x = x;
	p.ldx = ldx;
	p.y = y;
	p.ldy = ldy;
	p.bias = bias;
	p.flags = (flags & GEMM_GELU ? WIN_GELU : 0) |
	    (flags & GEMM_ACCUMULATE ? WIN_ACCUMULATE : 0);
	i8_gemm_run(&p, g->i8w_scratch);
	return 0;
}

/*
 * Precision int8: up to I8_FEW columns from the int8 weights (gemv-i8.c);
 * more (a prompt) through the weights made bf16 again for the call and
 * the bf16 products, which run such products at the arithmetic's speed
 * rather than memory's. Making a [4d][d] weight of large-v3-turbo bf16
 * costs about what reading its bf16 form once does.
 */
#define I8_FEW	16

static int
gemm_i8(struct gemm *g, const struct mat *w, const float *x, int ldx, int n,
    float *y, int ldy, int accumulate, char *err)
{
	struct gemv_i8_args a = { 0 };
	struct mat t = { 0 };
	int rc;

	if (n > I8_FEW) {
		if ((rc = scratch_reserve(&g->i8_bf16, &g->i8_len,
		    gemv_packed_elems(w->rows, w->cols) * 2, err)) != 0)
			return rc;
		gemv_i8_unpack(w->i8, w->i8_scale, w->rows, w->cols,
		    g->i8_bf16);
		t.rows = w->rows;
		t.cols = w->cols;
		t.packed = g->i8_bf16;
		return gemm_wx(g, &t, x, ldx, n, y, ldy, accumulate, err);
	}
	if ((rc = scratch_reserve(&g->gemv_scratch, &g->gemv_len,
	    GEMV_I8_SCRATCH_BYTES(w->cols), err)) != 0)
		return rc;
	a.wp = w->i8;
	a.scale = w->i8_scale;
	a.rows = w->rows;
	a.k = w->cols;
	a.x = x;
	a.ldx = ldx;
	a.n = n;
	a.y = y;
	a.ym = ldy;
	a.yj = 1;
	a.accumulate = accumulate;
	gemv_i8(&a, g->gemv_scratch);
	return 0;
}

int
gemm_wx(struct gemm *g, const struct mat *w, const float *x, int ldx, int n,
    float *y, int ldy, int accumulate, char *err)
{
	struct gemm_prim key = { 0 };
	int rc;

	if (w->i8_rowsum != NULL)
		return i8_win_run(g, w, x, ldx, n, y, ldy, NULL,
		    accumulate ? GEMM_ACCUMULATE : 0, err);
	if (w->i8 != NULL)
		return gemm_i8(g, w, x, ldx, n, y, ldy, accumulate, err);
	if (use_f16(g, w, n))
		return gemm_few(g, w, x, ldx, n, y, ldy, 1, accumulate, err);
	if (g->precision != SOTTO_PRECISION_BF16)
		return gemm_f32('N', 'N', w->rows, n, w->cols, 1.0f, w->f32,
		    w->cols, x, ldx, accumulate ? 1.0f : 0.0f, y, ldy, err);
	if (use_win_gemm(g, w, n, ldy))
		return gemm_linear(g, w, x, ldx, n, y, ldy, NULL,
		    accumulate ? GEMM_ACCUMULATE : 0, err);
	if (w->packed != NULL)
		return gemm_few(g, w, x, ldx, n, y, ldy, 1, accumulate, err);
	key.m = w->rows;
	key.k = w->cols;
	key.n = n;
	key.sa0 = w->cols;
	key.sa1 = 1;
	key.sb0 = n;
	key.sb1 = 1;
	key.ldc = ldy;
	key.accumulate = accumulate;
	if ((rc = gemm_x_to_bf16(g, x, ldx, w->cols, n, err)) != 0)
		return rc;
	return gemm_run_bf16(g, &key, w->bf16, g->xbuf, y, err);
}

/* p (its x and y already set) with w, n, bias and flags. */
static int
win_run(struct gemm *g, struct win_gemm *p, const struct mat *w, int n,
    const float *bias, int flags, char *err)
{
	int rc;

	if ((rc = scratch_reserve(&g->win_scratch, &g->win_len,
	    win_scratch_bytes(w->rows, w->cols, n), err)) != 0)
		return rc;
	p->w = w->packed;
	p->m = w->rows;
	p->k = w->cols;
	p->n = n;
	p->bias = bias;
	p->flags = flags;
	if (g->amx)
		amx_gemm_run(p, g->win_scratch);
	else
		dp_gemm_run(p, g->win_scratch);
	return 0;
}

int
gemm_linear(struct gemm *g, const struct mat *w, const float *x, int ldx,
    int n, float *y, int ldy, const float *bias, int flags, char *err)
{
	int rc;

	if (w->i8_rowsum != NULL)
		return i8_win_run(g, w, x, ldx, n, y, ldy, bias, flags, err);
	if (use_win_gemm(g, w, n, ldy)) {
		struct win_gemm p = { 0 };

		p.x = x;
		p.ldx = ldx;
		p.y = y;
		p.ldy = ldy;
		return win_run(g, &p, w, n, bias,
		    (flags & GEMM_GELU ? WIN_GELU : 0) |
		    (flags & GEMM_ACCUMULATE ? WIN_ACCUMULATE : 0) |
		    (flags & GEMM_GELU_X ? WIN_GELU_X : 0), err);
	}
	if (flags & GEMM_GELU_X)
		layer_gelu((float *)x, w->cols, n, ldx);
	if ((rc = gemm_wx(g, w, x, ldx, n, y, ldy,
	    (flags & GEMM_ACCUMULATE) != 0, err)) != 0)
		return rc;
	if (bias != NULL && (flags & GEMM_GELU))
		layer_bias_gelu(y, w->rows, n, ldy, bias);
	else if (bias != NULL)
		layer_add_bias(y, w->rows, n, ldy, bias);
	return 0;
}

/*
 * With AMX, fc1's results go straight into fc2's input tiles (through
 * GELU, in bf16) instead of out to hidden in f32 and back: the 4d x 1500
 * hidden layer was written, read back and repacked in every layer.
 */
int
gemm_mlp(struct gemm *g, const struct mat *fc1, const float *b1,
    const struct mat *fc2, const float *b2, const float *x, int ldx, int n,
    float *y, int ldy, float *hidden, int ldh, char *err)
{
	struct win_gemm p1 = { 0 }, p2 = { 0 };
	int rc;

	if (fc1->i8_rowsum != NULL) {	/* int8: GELU as fc1's results land */
		if ((rc = gemm_linear(g, fc1, x, ldx, n, hidden, ldh, b1,
		    GEMM_GELU, err)) != 0)
			return rc;
		return gemm_linear(g, fc2, hidden, ldh, n, y, ldy, b2,
		    GEMM_ACCUMULATE, err);
	}
	if (!use_win_gemm(g, fc1, n, ldh) || !use_win_gemm(g, fc2, n, ldy) ||
	    win_packed_bytes(fc1->rows, n) > (size_t)fc1->rows * ldh *
	    sizeof(float)) {
		if ((rc = gemm_linear(g, fc1, x, ldx, n, hidden, ldh, b1, 0,
		    err)) != 0)
			return rc;
		return gemm_linear(g, fc2, hidden, ldh, n, y, ldy, b2,
		    GEMM_ACCUMULATE | GEMM_GELU_X, err);
	}
	p1.x = x;
	p1.ldx = ldx;
	p1.y_packed = (uint16_t *)hidden;
	p2.x_packed = (const uint16_t *)hidden;
	p2.y = y;
	p2.ldy = ldy;
	if ((rc = win_run(g, &p1, fc1, n, b1, WIN_GELU, err)) != 0)
		return rc;
	return win_run(g, &p2, fc2, n, b2, WIN_ACCUMULATE, err);
}

int
gemm_xtw(struct gemm *g, const struct mat *w, const float *x, int ldx, int n,
    float *y, int ldy, char *err)
{
	struct gemm_prim key = { 0 };
	int rc;

	if (use_f16(g, w, n))
		return gemm_few(g, w, x, ldx, n, y, 1, ldy, 0, err);
	if (g->precision != SOTTO_PRECISION_BF16)
		return gemm_f32('T', 'T', n, w->rows, w->cols, 1.0f, x, ldx,
		    w->f32, w->cols, 0.0f, y, ldy, err);
	if (w->packed != NULL)
		return gemm_few(g, w, x, ldx, n, y, 1, ldy, 0, err);
	key.m = n;
	key.k = w->cols;
	key.n = w->rows;
	key.sa0 = 1;
	key.sa1 = n;
	key.sb0 = 1;
	key.sb1 = w->cols;
	key.ldc = ldy;
	if ((rc = gemm_x_to_bf16(g, x, ldx, w->cols, n, err)) != 0)
		return rc;
	return gemm_run_bf16(g, &key, g->xbuf, w->bf16, y, err);
}

int
gemm_bf16(struct gemm *g, int m, int n, int k, const uint16_t *a,
    int64_t sa0, int64_t sa1, const uint16_t *b, int64_t sb0, int64_t sb1,
    float *c, int ldc, char *err)
{
	struct gemm_prim key = { 0 };

	key.m = m;
	key.k = k;
	key.n = n;
	key.sa0 = sa0;
	key.sa1 = sa1;
	key.sb0 = sb0;
	key.sb1 = sb1;
	key.ldc = ldc;
	return gemm_run_bf16(g, &key, a, b, c, err);
}

int
gemm_f32(char transa, char transb, int m, int n, int k, float alpha,
    const float *a, int lda, const float *b, int ldb, float beta, float *c,
    int ldc, char *err)
{
	dnnl_status_t s;

	s = dnnl_sgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta,
	    c, ldc);
	if (s != dnnl_success)
		return dnnl_failed(s, "sgemm", err);
	return 0;
}
