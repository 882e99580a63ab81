/*
 * Between gemm.c (which code runs each product) and gemm-dnnl.c (oneDNN:
 * the engine, the bf16 matmul primitives kept per shape, sgemm).
 */
#ifndef SOTTO_GEMM_PRIVATE_H
#define SOTTO_GEMM_PRIVATE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <oneapi/dnnl/dnnl.h>

#include "sotto.h"

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
	/*
	 * The primitives run one at a time (lock): each holds its memory
	 * objects, pointed at the caller's data for a run. The scratch of
	 * the products is per thread (gemm.c).
	 */
	pthread_mutex_t lock;
	struct gemm_prim *prims;	/* owned */
	size_t n_prims, cap_prims;
	int amx;			/* gemv may use tile products */
};

/*
 * g's CPU engine and stream, or SOTTO_ECOMPUTE; gemm_dnnl_free() gives
 * them back with every primitive (also after a failed init).
 */
int	gemm_dnnl_init(struct gemm *g, char *err);
void	gemm_dnnl_free(struct gemm *g);

/* Run the cached primitive for key's shape on bf16 a, b into f32 c. */
int	gemm_dnnl_run(struct gemm *g, const struct gemm_prim *key,
	    const void *a, const void *b, float *c, char *err);

#endif
