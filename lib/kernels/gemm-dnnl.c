/*
 * The oneDNN side of the products (gemm.c picks what runs where): a CPU
 * engine and stream per struct gemm, bf16 matmul primitives, and
 * dnnl_sgemm for fp32.
 *
 * Design: the engine's shapes are static (1500 encoder positions, a few
 * decoder widths), so each distinct bf16 product gets one matmul primitive,
 * created on first use and kept for the life of the model. Creating one
 * costs milliseconds; running a small one costs microseconds. fp32 goes
 * through dnnl_sgemm, which needs no primitive and dispatches to the best
 * ISA itself.
 */
#include <stdlib.h>

#include <oneapi/dnnl/dnnl.h>

#include "err.h"
#include "gemm.h"
#include "gemm-private.h"

#ifdef SOTTO_MAX_ISA_AVX2
/*
 * A -Dmax_isa=avx2 build (clones.h) holds oneDNN to AVX2 before anything
 * asks it for its ISA; the hand kernels follow (gemm_cpu_isa, which
 * links this file into whatever picks a kernel). A user's
 * ONEDNN_MAX_CPU_ISA is kept.
 */
__attribute__((constructor)) static void
gemm_dnnl_max_avx2(void)
{
	if (getenv("ONEDNN_MAX_CPU_ISA") == NULL)
		(void)dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2);
}
#endif

unsigned
gemm_cpu_isa(void)
{
	return (unsigned)dnnl_get_effective_cpu_isa();
}

int
gemm_dnnl_init(struct gemm *g, char *err)
{
	if (dnnl_engine_create(&g->engine, dnnl_cpu, 0) != dnnl_success ||
	    dnnl_stream_create(&g->stream, g->engine,
	    dnnl_stream_default_flags) != dnnl_success)
		return err_set(err, SOTTO_ECOMPUTE, "oneDNN: cannot create "
		    "a CPU engine");
	return 0;
}

void
gemm_dnnl_free(struct gemm *g)
{
	size_t i;

	for (i = 0; i < g->n_prims; i++) {
		dnnl_primitive_destroy(g->prims[i].prim);
		dnnl_memory_destroy(g->prims[i].src);
		dnnl_memory_destroy(g->prims[i].wei);
		dnnl_memory_destroy(g->prims[i].dst);
	}
	free(g->prims);
	if (g->stream != NULL)
		dnnl_stream_destroy(g->stream);
	if (g->engine != NULL)
		dnnl_engine_destroy(g->engine);
}

static int
dnnl_failed(dnnl_status_t s, const char *what, char *err)
{
	return err_set(err, SOTTO_ECOMPUTE, "oneDNN %s failed (status %d)",
	    what, (int)s);
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
int
gemm_dnnl_run(struct gemm *g, const struct gemm_prim *key, const void *a,
    const void *b, float *c, char *err)
{
	struct gemm_prim *p = NULL;
	int rc;

	pthread_mutex_lock(&g->lock);
	if ((rc = prim_get(g, key, &p, err)) == 0)
		rc = prim_run(g, p, a, b, c, err);
	pthread_mutex_unlock(&g->lock);
	return rc;
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
	return gemm_dnnl_run(g, &key, a, b, c, err);
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
