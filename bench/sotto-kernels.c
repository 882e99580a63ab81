/*
 * sotto-kernels: the decoder's few-column products, sotto's kernels
 * against oneDNN's matmul on the same shape (docs/benchmarks.md).
 *
 *   sotto-kernels ROWS K N [--reps R] [--threads T]
 *
 * y = W x for W [ROWS][K] and N columns: sotto's bf16 kernel (gemv.c),
 * sotto's int8 kernel (gemv-i8.c: the columns kept to 16 bits by two
 * byte products each), oneDNN's bf16 matmul (these three where the CPU
 * has AVX512-VNNI and -BF16); where it has AVX2 (forced on others with
 * ONEDNN_MAX_CPU_ISA=AVX2), the fp32 path's F16 rows (gemv-f16.c) and
 * precision int8's AVX2 kernel (gemv-i8-avx2.c); and always oneDNN's int8
 * matmul with a scale per row, s8 x s8 on 2 N byte rows (the same two
 * byte products per column as gemv-i8.c's) and u8 x s8 on N (one byte
 * per column: fewer bits than sotto's). Each runs R times (default 96)
 * over 24 copies of the weights in turn, more than the L3 cache holds
 * for decoder shapes, so every product reads its weights from memory as
 * a decoder step does. Prints the median of each and its weight bytes
 * per second.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <oneapi/dnnl/dnnl.h>

#include "amx.h"
#include "gemv.h"

#define COPIES	24

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
median(double *t, int n)
{
	qsort(t, n, sizeof(*t), cmp_double);
	return t[n / 2];
}

static void
report(const char *what, double s, size_t bytes)
{
	printf("%-44s %8.3f ms  %6.1f GB/s\n", what, s * 1e3, bytes / s / 1e9);
}

#define CHECK(x) do {							\
	if ((x) != dnnl_success) {					\
		fprintf(stderr, "sotto-kernels: oneDNN: %s failed\n", #x); \
		exit(1);						\
	}								\
} while (0)

/* oneDNN's matmul of m x k src (bf16 or s8) by k x rows weights. */
static void
onednn(int rows, int k, int m, int int8, int reps)
{
	dnnl_data_type_t dt = int8 ? dnnl_s8 : dnnl_bf16;
	dnnl_data_type_t sdt = int8 == 2 ? dnnl_u8 : dt;
	dnnl_dims_t sd = { m, k }, wd = { k, rows }, dd = { m, rows };
	dnnl_memory_desc_t src, wplain, wany, dst;
	const dnnl_memory_desc_t *wq;
	dnnl_engine_t eng;
	dnnl_stream_t st;
	dnnl_matmul_desc_t md;
	dnnl_primitive_attr_t attr;
	dnnl_primitive_desc_t pd;
	dnnl_primitive_t prim;
	dnnl_memory_t ms, mw[COPIES], mdst, mraw;
	const char *impl = "";
	float *scales = malloc((size_t)rows * sizeof(float));
	void *x = calloc((size_t)m * k, 2), *raw = malloc((size_t)rows * k * 2);
	double t[1024];
	char what[96];
	int i;

	CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
	CHECK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
	CHECK(dnnl_memory_desc_init_by_tag(&src, 2, sd, sdt, dnnl_ab));
	CHECK(dnnl_memory_desc_init_by_tag(&wplain, 2, wd, dt, dnnl_ba));
	CHECK(dnnl_memory_desc_init_by_tag(&wany, 2, wd, dt,
	    dnnl_format_tag_any));
	CHECK(dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_f32, dnnl_ab));
	CHECK(dnnl_matmul_desc_init(&md, &src, &wany, NULL, &dst));
	CHECK(dnnl_primitive_attr_create(&attr));
	for (i = 0; i < rows; i++)
		scales[i] = 1e-3f;
	if (int8)
		CHECK(dnnl_primitive_attr_set_output_scales(attr, rows, 2,
		    scales));
	CHECK(dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL));
	dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
	wq = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
	CHECK(dnnl_primitive_create(&prim, pd));
	memset(raw, 1, (size_t)rows * k * 2);
	CHECK(dnnl_memory_create(&ms, &src, eng, x));
	CHECK(dnnl_memory_create(&mdst, &dst, eng, DNNL_MEMORY_ALLOCATE));
	CHECK(dnnl_memory_create(&mraw, &wplain, eng, raw));
	for (i = 0; i < COPIES; i++) {
		dnnl_primitive_desc_t rpd;
		dnnl_primitive_t r;
		dnnl_exec_arg_t a[2];

		CHECK(dnnl_memory_create(&mw[i], wq, eng,
		    DNNL_MEMORY_ALLOCATE));
		CHECK(dnnl_reorder_primitive_desc_create(&rpd, &wplain, eng,
		    wq, eng, NULL));
		CHECK(dnnl_primitive_create(&r, rpd));
		a[0] = (dnnl_exec_arg_t){ DNNL_ARG_FROM, mraw };
		a[1] = (dnnl_exec_arg_t){ DNNL_ARG_TO, mw[i] };
		CHECK(dnnl_primitive_execute(r, st, 2, a));
		dnnl_stream_wait(st);
		dnnl_primitive_destroy(r);
		dnnl_primitive_desc_destroy(rpd);
	}
	for (i = 0; i < reps; i++) {
		dnnl_exec_arg_t a[3] = { { DNNL_ARG_SRC, ms },
		    { DNNL_ARG_WEIGHTS, mw[i % COPIES] },
		    { DNNL_ARG_DST, mdst } };
		double t0 = now();

		CHECK(dnnl_primitive_execute(prim, st, 3, a));
		dnnl_stream_wait(st);
		t[i] = now() - t0;
	}
	snprintf(what, sizeof(what), "oneDNN %s (%s, m %d)", int8 == 2 ? "u8s8" :
	    int8 ? "s8s8" : "bf16", impl, m);
	report(what, median(t, reps), (size_t)rows * k * (int8 ? 1 : 2));
	for (i = 0; i < COPIES; i++)
		dnnl_memory_destroy(mw[i]);
	dnnl_memory_destroy(ms);
	dnnl_memory_destroy(mdst);
	dnnl_memory_destroy(mraw);
	dnnl_primitive_destroy(prim);
	dnnl_primitive_desc_destroy(pd);
	dnnl_primitive_attr_destroy(attr);
	dnnl_stream_destroy(st);
	dnnl_engine_destroy(eng);
	free(scales);
	free(x);
	free(raw);
}

/*
 * A 16-bit kernel and an int8 kernel on the same shape: w, q8 and sc hold
 * COPIES copies of their weights (and the int8 row scales), filled and
 * freed by the caller. The 16-bit kernels' scratch types differ, hence
 * the adapters.
 */
struct pair {
	void		 (*wide)(const struct gemv_args *, void *);
	const char	*wide_name;
	uint16_t	*w[COPIES];
	void		 (*i8)(const struct gemv_i8_args *, void *);
	const char	*i8_name;
	uint8_t		*q8[COPIES];
	float		*sc[COPIES];
};

static void
bf16_run(const struct gemv_args *a, void *scratch)
{
	gemv_bf16(a, scratch);
}

static void
f16_run(const struct gemv_args *a, void *scratch)
{
	gemv_f16(a, scratch);
}

/*
 * Random x (after the caller's weights, from the same rand() sequence),
 * then reps runs of each kernel in turn over the copies; reports each
 * one's median.
 */
static void
time_pair(const struct pair *p, int rows, int k, int n, int reps,
    void *scratch)
{
	size_t e = (size_t)rows * k, i;
	float *x = malloc((size_t)k * n * 4);
	float *y = calloc((size_t)rows * n, 4);
	struct gemv_args a = { .rows = rows, .k = k, .x = x, .ldx = n,
	    .n = n, .y = y, .ym = n, .yj = 1 };
	struct gemv_i8_args b = { .rows = rows, .k = k, .x = x, .ldx = n,
	    .n = n, .y = y, .ym = n, .yj = 1 };
	double tw[1024], ti[1024];
	int r;

	for (i = 0; i < (size_t)k * n; i++)
		x[i] = rand() / (float)RAND_MAX - 0.5f;
	for (r = 0; r < reps; r++) {
		double t0 = now();

		a.wp = p->w[r % COPIES];
		p->wide(&a, scratch);
		tw[r] = now() - t0;
		t0 = now();
		b.wp = p->q8[r % COPIES];
		b.scale = p->sc[r % COPIES];
		p->i8(&b, scratch);
		ti[r] = now() - t0;
	}
	report(p->wide_name, median(tw, reps), e * 2);
	report(p->i8_name, median(ti, reps), e);
	free(x);
	free(y);
}

/* sotto's bf16 and int8 kernels on the same shape. */
static void
sotto(int rows, int k, int n, int reps)
{
	size_t e = (size_t)rows * k, i;
	uint16_t *f16 = malloc(e * 2), *bf = malloc(e * 2);
	void *scratch = aligned_alloc(64, GEMV_I8_SCRATCH_BYTES(k) +
	    GEMV_SCRATCH_BYTES(k));
	struct pair p = { .wide = bf16_run,
	    .wide_name = "sotto bf16 (gemv.c)", .i8 = gemv_i8,
	    .i8_name = "sotto int8 (gemv-i8.c)" };
	int r;

	srand(1);
	for (i = 0; i < e; i++) {
		_Float16 h = (_Float16)((rand() / (float)RAND_MAX - 0.5f) *
		    0.05f);

		memcpy(&f16[i], &h, 2);
		bf[i] = bf16_round((float)h);
	}
	for (r = 0; r < COPIES; r++) {
		p.w[r] = aligned_alloc(64, gemv_packed_elems(rows, k) * 2);
		p.q8[r] = aligned_alloc(64, gemv_i8_bytes(rows, k));
		p.sc[r] = malloc((size_t)rows * sizeof(float));
		gemv_pack(bf, rows, k, p.w[r]);
		gemv_i8_pack(f16, rows, k, 0, p.q8[r], p.sc[r], NULL);
	}
	time_pair(&p, rows, k, n, reps, scratch);
	for (r = 0; r < COPIES; r++) {
		free(p.w[r]);
		free(p.q8[r]);
		free(p.sc[r]);
	}
	free(f16);
	free(bf);
	free(scratch);
}

/*
 * The AVX2 forms: the fp32 path's F16 rows (gemv-f16.c) and precision
 * int8's AVX2 kernel (gemv-i8-avx2.c).
 */
static void
sotto_avx2(int rows, int k, int n, int reps)
{
	size_t e = (size_t)rows * k, i;
	void *scratch = aligned_alloc(64, GEMV_I8_AVX2_SCRATCH_BYTES(k) +
	    GEMV_F16_SCRATCH(k) * 4);
	struct pair p = { .wide = f16_run,
	    .wide_name = "sotto fp32 from F16 (gemv-f16.c)",
	    .i8 = gemv_i8_avx2, .i8_name = "sotto int8 AVX2 (gemv-i8-avx2.c)" };
	int r;

	srand(1);
	for (r = 0; r < COPIES; r++) {
		p.w[r] = malloc(e * 2);
		p.q8[r] = aligned_alloc(64, gemv_i8_avx2_bytes(rows, k));
		p.sc[r] = malloc((size_t)rows * sizeof(float));
		for (i = 0; i < e; i++) {
			_Float16 h = (_Float16)((rand() / (float)RAND_MAX -
			    0.5f) * 0.05f);

			memcpy(&p.w[r][i], &h, 2);
		}
		gemv_i8_avx2_pack(p.w[r], rows, k, 0, p.q8[r], p.sc[r]);
	}
	time_pair(&p, rows, k, n, reps, scratch);
	for (r = 0; r < COPIES; r++) {
		free(p.w[r]);
		free(p.q8[r]);
		free(p.sc[r]);
	}
	free(scratch);
}

int
main(int argc, char **argv)
{
	int rows, k, n, reps = 96, i;

	if (argc < 4) {
		fprintf(stderr, "usage: sotto-kernels ROWS K N [--reps R] "
		    "[--threads T]\n");
		return 2;
	}
	rows = atoi(argv[1]);
	k = atoi(argv[2]);
	n = atoi(argv[3]);
	for (i = 4; i + 1 < argc; i += 2)
		if (strcmp(argv[i], "--reps") == 0)
			reps = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--threads") == 0)
			omp_set_num_threads(atoi(argv[i + 1]));
	if (rows % GEMV_I8_ALIGN || k % GEMV_I8_ALIGN || n < 1 ||
	    n > GEMV_I8_COLS || reps < 1 || reps > 1024) {
		fprintf(stderr, "sotto-kernels: ROWS and K multiples of %d, "
		    "N 1 to %d, R 1 to 1024\n", GEMV_I8_ALIGN, GEMV_I8_COLS);
		return 2;
	}
	printf("%d x %d by %d column%s, %d threads, median of %d\n", rows, k,
	    n, n > 1 ? "s" : "", omp_get_max_threads(), reps);
	if (gemv_i8_supported()) {
		sotto(rows, k, n, reps);
		onednn(rows, k, n, 0, reps);
	}
	if (gemv_i8_avx2_supported())
		sotto_avx2(rows, k, n, reps);
	onednn(rows, k, 2 * n, 1, reps);
	onednn(rows, k, n, 2, reps);
	return 0;
}
