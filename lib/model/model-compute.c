/*
 * What computes a model's products: the precision asked for (auto
 * resolved, int8 on AVX512-VNNI or on AVX2), the threads, the gemm; and
 * its name for sotto_model_info.
 */
#include <omp.h>

#include "err.h"
#include "gemm.h"
#include "gemv.h"
#include "model.h"

/* What this CPU runs instead: auto's choice, which may not be bf16. */
static int
precision_int8_refused(char *err)
{
	enum sotto_precision alt = SOTTO_PRECISION_FP32;

	gemm_pick_precision(SOTTO_PRECISION_AUTO, &alt, NULL);
	return err_set(err, SOTTO_EINVAL, "precision int8 needs AVX512-VNNI "
	    "and AVX512-BF16, or AVX2, FMA and F16C, which this CPU does "
	    "not have (or ONEDNN_MAX_CPU_ISA hides); use auto, which is %s "
	    "on this CPU",
	    alt == SOTTO_PRECISION_BF16 ? "bf16" : "fp32");
}

/*
 * auto on a CPU without bf16 but with AVX2, FMA and F16C: precision int8's
 * AVX2 path, by the rule that auto may round only within 0.3 WER points
 * of fp32: on the 15 test files tiny.en and base, greedy and beam 5, were
 * within a word of it (docs/architecture.md "Numerics"), and a tiny.en
 * step took about 0.4 of fp32's and a window 0.73 (docs/benchmarks.md).
 */
static int
auto_int8_avx2(void)
{
	enum sotto_precision p = SOTTO_PRECISION_BF16;

	return gemm_pick_precision(SOTTO_PRECISION_AUTO, &p, NULL) == 0 &&
	    p == SOTTO_PRECISION_FP32 && gemv_i8_avx2_supported();
}

int
model_compute_setup(struct sotto_model *m, const struct sotto_model_params *p,
    char *err)
{
	enum sotto_precision want = p->precision;
	int rc;

	if (want == SOTTO_PRECISION_INT8 && gemv_i8_supported()) {
		m->int8 = 1;
		want = SOTTO_PRECISION_BF16;
	} else if (want == SOTTO_PRECISION_INT8 && gemv_i8_avx2_supported()) {
		m->int8_avx2 = 1;
		want = SOTTO_PRECISION_FP32;
	} else if (want == SOTTO_PRECISION_INT8) {
		return precision_int8_refused(err);
	} else if (want == SOTTO_PRECISION_AUTO && auto_int8_avx2()) {
		m->int8_avx2 = 1;
		want = SOTTO_PRECISION_FP32;
	}
	if ((rc = gemm_pick_precision(want, &m->precision, err)) != 0)
		return rc;
	m->threads = p->threads > 0 ? p->threads : omp_get_num_procs();
	omp_set_num_threads(m->threads);
	return gemm_new(m->precision, &m->gemm, err);
}

/*
 * OpenMP keeps the team size per thread, so setting it at load reaches
 * only the thread that loaded: sottod, which loads in one thread and
 * computes in another, ran every step on all the cores whatever -t or
 * `threads` said. Each compute entry (mel, encoder, decoder) sets it for
 * its own thread, capped by sotto_thread_share().
 */
static _Thread_local int thread_share;	/* sotto_thread_share(), 0: all */

void
sotto_thread_share(int n)
{
	thread_share = n > 0 ? n : 0;
}

/* The calling thread's OpenMP team: n threads from its next region. */
static void
team_of(int n)
{
	if (omp_get_max_threads() != n)
		omp_set_num_threads(n);
}

void
model_use_threads(const struct sotto_model *m)
{
	team_of(thread_share > 0 && thread_share < m->threads ? thread_share :
	    m->threads);
}

/* The most threads a call can use: per-thread buffers are this many. */
void
model_use_all_threads(const struct sotto_model *m)
{
	team_of(m->threads);
}

/* Which kernels run the products, as the log and `sotto status` say. */
const char *
model_compute_name(const struct sotto_model *m)
{
	if (m->int8)
		return "int8 on AVX512-VNNI";
	if (m->int8_avx2)
		return "int8 on AVX2, fp32 encoder q/k/v";
	if (m->precision == SOTTO_PRECISION_BF16)
		return gemm_has_amx(m->gemm) ? "bf16 on AMX" :
		    "bf16 on AVX512-BF16";
	return "fp32";
}
