/*
 * Between gemm.c (which code runs each product) and gemm-dnnl.c (oneDNN:
 * the engine, the bf16 matmul primitives kept per shape, sgemm).
 */
#ifndef SOTTO_GEMM_PRIVATE_H
#define SOTTO_GEMM_PRIVATE_H

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
