/*
 * Matrix products: the kernel for each (gemm.h), or oneDNN (gemm-dnnl.c).
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "err.h"
#include "amx.h"
#include "gemm.h"
#include "gemm-private.h"
#include "gemm-win.h"
#include "gemv.h"
#include "layers.h"

/*
 * The products' scratch, per thread rather than per model: several
 * threads may compute with one model at once (sottod's compute threads),
 * each on its own states. A thread's buffers are freed when it exits,
 * or when it frees a model (they come back on its next product).
 */
enum scratch_use { SCRATCH_X, SCRATCH_GEMV, SCRATCH_WIN, SCRATCH_I8_BF16,
	SCRATCH_I8W, SCRATCH_N };

struct gemm_scratch {
	uint16_t	*buf[SCRATCH_N];	/* owned, 64-byte aligned */
	size_t		 len[SCRATCH_N];	/* bytes */
};

static _Thread_local struct gemm_scratch tls_scratch;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void
scratch_free(void *p)
{
	struct gemm_scratch *s = p;
	int i;

	for (i = 0; i < SCRATCH_N; i++) {
		free(s->buf[i]);
		s->buf[i] = NULL;
		s->len[i] = 0;
	}
}

static void
scratch_key_make(void)
{
	(void)pthread_key_create(&scratch_key, scratch_free);
}

#define SCRATCH(which)	(tls_scratch.buf[which])

static int
cpu_has_bf16(void)
{
	unsigned isa = gemm_cpu_isa();

	return ((isa & dnnl_cpu_isa_avx512_core_bf16) ==
	    dnnl_cpu_isa_avx512_core_bf16);
}

static int
cpu_has_amx(void)
{
	unsigned isa = gemm_cpu_isa();

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
	int rc;

	if ((g = calloc(1, sizeof(*g))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	pthread_mutex_init(&g->lock, NULL);
	g->precision = precision;
	g->amx = precision == SOTTO_PRECISION_BF16 && cpu_has_amx() &&
	    gemv_amx_init();
	if ((rc = gemm_dnnl_init(g, err)) != 0) {
		gemm_free(g);
		return rc;
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
	if (g == NULL)
		return;
	gemm_dnnl_free(g);
	pthread_mutex_destroy(&g->lock);
	scratch_free(&tls_scratch);
	free(g);
}

/*
 * Make scratch which of the calling thread hold at least need bytes
 * (64-byte aligned), keeping it when it already does: the shapes are
 * static, so this allocates on a thread's first use.
 */
static int
scratch_reserve(enum scratch_use which, size_t need, char *err)
{
	struct gemm_scratch *s = &tls_scratch;

	pthread_once(&scratch_once, scratch_key_make);
	if (need <= s->len[which])
		return 0;
	free(s->buf[which]);
	s->buf[which] = aligned_alloc(64, (need + 63) & ~(size_t)63);
	s->len[which] = s->buf[which] == NULL ? 0 : need;
	if (s->buf[which] == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	/* a value for the key, so that the thread's exit frees them */
	pthread_setspecific(scratch_key, s);
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

	if ((rc = scratch_reserve(SCRATCH_X, need * 2,
	    err)) != 0)
		return rc;
#pragma omp parallel for schedule(static) if (need > 65536)
	for (i = 0; i < k; i++)
		layer_to_bf16(x + (size_t)i * ldx, SCRATCH(SCRATCH_X) + (size_t)i * n, n);
	return 0;
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

	if ((rc = scratch_reserve(SCRATCH_GEMV, fp32 ?
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
		gemv_f16(&a, (float *)SCRATCH(SCRATCH_GEMV));
	else
		gemv_bf16(&a, SCRATCH(SCRATCH_GEMV));
	return 0;
}

/* Precision int8's encoder: y = W x + b over the window (gemm-i8.c, or
 * gemm-u8.c without VNNI). */
static struct i8_win
i8_win_of(const struct mat *w, const float *x, int ldx, int n, float *y,
    int ldy, const float *bias, int flags)
{
	struct i8_win p = { 0 };

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
	return p;
}

static int
i8_win_run(struct gemm *g, const struct mat *w, const float *x, int ldx,
    int n, float *y, int ldy, const float *bias, int flags, char *err)
{
	struct i8_win p;
	int rc;

	if ((rc = scratch_reserve(SCRATCH_I8W, w->i8_rows ?
	    u8_scratch_bytes(w->rows, w->cols, 0) :
	    i8_win_scratch_bytes(w->cols, n), err)) != 0)
		return rc;
	if (flags & GEMM_GELU_X)
		layer_gelu((float *)x, w->cols, n, ldx);
	p = i8_win_of(w, x, ldx, n, y, ldy, bias, flags);
	if (w->i8_rows)
		return u8_gemm_run(&p, SCRATCH(SCRATCH_I8W), err);
	i8_gemm_run(&p, SCRATCH(SCRATCH_I8W));
	return 0;
}

/* The MLP from int8 rows (gemm-u8.c), fc1's results kept in cache. */
static int
u8_mlp(const struct mat *fc1, const float *b1, const struct mat *fc2,
    const float *b2, const float *x, int ldx, int n, float *y, int ldy,
    char *err)
{
	struct i8_win p1 = i8_win_of(fc1, x, ldx, n, NULL, 0, b1, GEMM_GELU);
	struct i8_win p2 = i8_win_of(fc2, NULL, 0, n, y, ldy, b2,
	    GEMM_ACCUMULATE);
	int rc;

	if ((rc = scratch_reserve(SCRATCH_I8W, u8_scratch_bytes(fc1->rows >
	    fc2->rows ? fc1->rows : fc2->rows, fc1->cols > fc2->cols ?
	    fc1->cols : fc2->cols, fc1->rows), err)) != 0)
		return rc;
	return u8_mlp_run(&p1, &p2, SCRATCH(SCRATCH_I8W), err);
}

/*
 * Precision int8: up to I8_FEW columns from the int8 weights (gemv-i8.c);
 * more (a prompt) through the weights made bf16 again for the call and
 * the bf16 products, which run such products at the arithmetic's speed
 * rather than memory's. Making a [4d][d] weight of large-v3-turbo bf16
 * costs about what reading its bf16 form once does.
 */
#define I8_FEW	16

/* The product of w's int8 form with x, as both int8 kernels take it. */
static struct gemv_i8_args
i8_args(const struct mat *w, const float *x, int ldx, int n, float *y,
    ptrdiff_t ym, ptrdiff_t yj, int accumulate)
{
	struct gemv_i8_args a = {
		.wp = w->i8, .scale = w->i8_scale, .rows = w->rows,
		.k = w->cols, .x = x, .ldx = ldx, .n = n, .y = y, .ym = ym,
		.yj = yj, .accumulate = accumulate,
	};

	return a;
}

/*
 * Precision int8 without AVX512-VNNI (gemv-i8-avx2.c): an fp32 model's
 * decoder weights and head, any number of columns (a prompt's go
 * GEMV_I8_COLS per pass over the weights).
 */
static int
gemm_i8_avx2(struct gemm *g, const struct mat *w, const float *x, int ldx,
    int n, float *y, ptrdiff_t ym, ptrdiff_t yj, int accumulate, char *err)
{
	struct gemv_i8_args a;
	int rc;

	if ((rc = scratch_reserve(SCRATCH_GEMV,
	    GEMV_I8_AVX2_SCRATCH_BYTES(w->cols), err)) != 0)
		return rc;
	a = i8_args(w, x, ldx, n, y, ym, yj, accumulate);
	gemv_i8_avx2(&a, SCRATCH(SCRATCH_GEMV));
	return 0;
}

static int
gemm_i8(struct gemm *g, const struct mat *w, const float *x, int ldx, int n,
    float *y, ptrdiff_t ym, ptrdiff_t yj, int accumulate, char *err)
{
	struct gemv_i8_args a;
	struct mat t = { 0 };
	int rc;

	if (w->i8_avx2)
		return gemm_i8_avx2(g, w, x, ldx, n, y, ym, yj, accumulate,
		    err);
	if (n > I8_FEW) {
		if ((rc = scratch_reserve(SCRATCH_I8_BF16,
		    gemv_packed_elems(w->rows, w->cols) * 2, err)) != 0)
			return rc;
		gemv_i8_unpack(w->i8, w->i8_scale, w->rows, w->cols,
		    SCRATCH(SCRATCH_I8_BF16));
		t.rows = w->rows;
		t.cols = w->cols;
		t.packed = SCRATCH(SCRATCH_I8_BF16);
		return gemm_wx(g, &t, x, ldx, n, y, (int)ym, accumulate, err);
	}
	if ((rc = scratch_reserve(SCRATCH_GEMV,
	    GEMV_I8_SCRATCH_BYTES(w->cols), err)) != 0)
		return rc;
	a = i8_args(w, x, ldx, n, y, ym, yj, accumulate);
	gemv_i8(&a, SCRATCH(SCRATCH_GEMV));
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
		return gemm_i8(g, w, x, ldx, n, y, ldy, 1, accumulate, err);
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
	return gemm_dnnl_run(g, &key, w->bf16, SCRATCH(SCRATCH_X), y, err);
}

/* p (its x and y already set) with w, n, bias and flags. */
static int
win_run(struct gemm *g, struct win_gemm *p, const struct mat *w, int n,
    const float *bias, int flags, char *err)
{
	int rc;

	if ((rc = scratch_reserve(SCRATCH_WIN,
	    win_scratch_bytes(w->rows, w->cols, n), err)) != 0)
		return rc;
	p->w = w->packed;
	p->m = w->rows;
	p->k = w->cols;
	p->n = n;
	p->bias = bias;
	p->flags = flags;
	if (g->amx)
		amx_gemm_run(p, SCRATCH(SCRATCH_WIN));
	else
		dp_gemm_run(p, SCRATCH(SCRATCH_WIN));
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

	if (fc1->i8_rows && fc2->i8_rows)
		return u8_mlp(fc1, b1, fc2, b2, x, ldx, n, y, ldy, err);
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

	if (w->i8_avx2) {
		if ((rc = gemm_i8_avx2(g, w, x, ldx, n, y, 1, ldy, 0, err)))
			return rc;
		/* an output head that kept its F16 rows: its top exact */
		if (w->f16 == NULL)
			return 0;
		if ((rc = scratch_reserve(SCRATCH_GEMV,
		    GEMV_I8_AVX2_RESCORE_BYTES(w->cols, n), err)) != 0)
			return rc;
		gemv_i8_avx2_rescore(w->f16, w->rows, w->cols, x, ldx, n, y,
		    ldy, SCRATCH(SCRATCH_GEMV));
		return 0;
	}
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
	return gemm_dnnl_run(g, &key, SCRATCH(SCRATCH_X), w->bf16, y, err);
}
