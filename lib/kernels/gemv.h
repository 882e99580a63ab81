/*
 * Decoder products of packed bf16 weights with a few columns (one per
 * beam) or a prompt's worth, at memory speed. Needs AVX512-BF16, which
 * every CPU that runs a model in bf16 has (gemm_pick_precision checks);
 * uses AMX where the CPU and kernel allow it.
 */
#ifndef SOTTO_GEMV_H
#define SOTTO_GEMV_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/*
 * max(m, |v|) for a column's scale: the same value as fmaxf(m, fabsf(v))
 * (a NaN v leaves m), but inline; fmaxf stayed a libm call per element.
 */
static inline float
gemv_absmax(float m, float v)
{
	float a = fabsf(v);

	return a > m ? a : m;
}

#define GEMV_K_ALIGN	32	/* k must be a multiple of this */

/* Elements of the packed form of a [rows][k] matrix (rows padded to 16,
 * k to 32, with zeros). */
size_t	gemv_packed_elems(int rows, int k);

/* Pack bf16 w [rows][k] into out, which the caller allocated with
 * gemv_packed_elems(rows, k) elements. gemv_bf16 needs k a multiple of
 * 32; gemm-amx.c takes any k. */
void	gemv_pack(const uint16_t *w, int rows, int k, uint16_t *out);

/* Ask Linux for AMX state; 1 if granted, so amx may be set. */
int	gemv_amx_init(void);

/*
 * y[m * ym + j * yj] = sum_kk W[m][kk] x[kk * ldx + j] (plus the old value
 * when accumulate is set) for m < rows, j < n, with x rounded to bf16.
 */
struct gemv_args {
	const uint16_t *wp;	/* packed bf16 (gemv_pack), or F16 rows for
				   gemv_f16; borrowed */
	int rows, k;
	const float *x;		/* borrowed */
	int ldx, n;
	float *y;		/* borrowed */
	ptrdiff_t ym, yj;
	int accumulate;
	int amx;		/* use tile products (gemv_amx_init said 1) */
};

/* Bytes of scratch gemv_bf16 needs for k. */
#define GEMV_SCRATCH_BYTES(k)	((size_t)(k) * 16 * 2)

void	gemv_bf16(const struct gemv_args *, uint16_t *scratch);

/*
 * The fp32 path (gemv-f16.c): the same product with wp the F16 weights
 * row-major [rows][k] (amx unused), in f32.
 */
#define GEMV_F16_COLS	8	/* columns per pass over the weights */
/* Floats of scratch gemv_f16 needs for k. */
#define GEMV_F16_SCRATCH(k)	((size_t)(k) * GEMV_F16_COLS)

void	gemv_f16(const struct gemv_args *, float *scratch);

/*
 * sum_i w[i] x[i], w F16, k a multiple of 32, by AVX2, FMA and F16C: the
 * dot of gemv_f16's AVX2 form, also gemv_i8_avx2_rescore's. The caller
 * checks the CPU has them.
 */
__attribute__((target("avx2,f16c,fma")))
float	gemv_dot_f16_avx2(const uint16_t *w, const float *x, int k);

/*
 * Precision int8 (gemv-i8.c): the decoder's weights as int8 with a scale
 * per row, products of a few columns by AVX512-VNNI. rows and k must be
 * multiples of GEMV_I8_ALIGN.
 */
#define GEMV_I8_ALIGN	64
#define GEMV_I8_COLS	8	/* columns per pass over the weights */

/* 1 if this CPU runs gemv_i8 (AVX512-VNNI, -BW, -VL, -BF16). */
int	gemv_i8_supported(void);

/* Bytes of the packed int8 form of [rows][k]. */
size_t	gemv_i8_bytes(int rows, int k);
/*
 * Quantize F16 rows [rows][k] into rows row0.. of wp (gemv_i8_bytes of
 * the whole matrix) and their scales into scale[row0..]. With rowsum
 * NULL as q + 128 (gemv_i8's unsigned form); else as q (signed, the
 * window products of gemm-i8.c), each row's sum of q into rowsum[row0..].
 */
void	gemv_i8_pack(const uint16_t *f16, int rows, int k, int row0,
	    uint8_t *wp, float *scale, int32_t *rowsum);

/*
 * The dequantized weights as bf16 in gemv_pack's layout (out has
 * gemv_packed_elems(rows, k)), for products of many columns (gemm-win.h).
 */
void	gemv_i8_unpack(const uint8_t *wp, const float *scale, int rows, int k,
	    uint16_t *out);

struct gemv_i8_args {
	const uint8_t *wp;	/* gemv_i8_pack; borrowed */
	const float *scale;	/* [rows]; borrowed */
	int rows, k;
	const float *x;		/* x[kk * ldx + j], as gemv_args; borrowed */
	int ldx, n;
	float *y;		/* borrowed */
	ptrdiff_t ym, yj;
	int accumulate;
};

#define GEMV_I8_SCRATCH_BYTES(k)	((size_t)(k) * GEMV_I8_COLS * 2)

/* y (+)= W x as gemv_bf16, from int8 weights; needs AVX512-VNNI. */
void	gemv_i8(const struct gemv_i8_args *, void *scratch);

/*
 * Precision int8 without AVX-512 (gemv-i8-avx2.c): the same product by
 * AVX2, FMA and F16C from signed int8 weights in gemv_i8's block layout,
 * the rows padded with zeros to a multiple of 32 (any rows; k a multiple
 * of GEMV_I8_ALIGN). Any number of columns, GEMV_I8_COLS per pass.
 */
/* 1 if this CPU runs gemv_i8_avx2 (capped by ONEDNN_MAX_CPU_ISA). */
int	gemv_i8_avx2_supported(void);
/* rows padded as the packed form holds them (scales needed for each). */
int	gemv_i8_avx2_rows(int rows);
size_t	gemv_i8_avx2_bytes(int rows, int k);
/*
 * Quantize F16 rows [rows][k] into rows row0.. of wp and their scales
 * into scale[row0..]; the caller zeroes the padding rows and scales.
 */
void	gemv_i8_avx2_pack(const uint16_t *f16, int rows, int k, int row0,
	    uint8_t *wp, float *scale);

#define GEMV_I8_AVX2_SCRATCH_BYTES(k)	((size_t)(k) * GEMV_I8_COLS * 2)

/* y (+)= W x from gemv_i8_avx2_pack's weights; needs AVX2, FMA, F16C. */
void	gemv_i8_avx2(const struct gemv_i8_args *, void *scratch);

/*
 * For an output head (y[j * yj + v], v < rows, the logits layout): the
 * GEMV_I8_AVX2_EXACT largest of each of the n columns recomputed in f32
 * from the F16 rows f16 [rows][k] (as logits.c rescores its estimates),
 * so that the top of the distribution, which decoding reads, is not the
 * int8 rounding's. The columns are shared among the threads. scratch:
 * GEMV_I8_AVX2_RESCORE_BYTES(k, n).
 */
#define GEMV_I8_AVX2_EXACT	64
#define GEMV_I8_AVX2_RESCORE_BYTES(k, n)	((size_t)(k) * (n) * sizeof(float))

void	gemv_i8_avx2_rescore(const uint16_t *f16, int rows, int k,
	    const float *x, int ldx, int n, float *y, ptrdiff_t yj,
	    void *scratch);

#endif
