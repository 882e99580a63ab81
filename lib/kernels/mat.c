/*
 * Weights at load: F16 tensors from the GGUF converted to the model's
 * precision (struct mat, gemm.h), and packed
 * into the layouts the kernels read. The conversion is most of a model
 * load, so it is shared among the threads.
 */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "amx.h"
#include "err.h"
#include "gemm.h"
#include "gemm-win.h"
#include "gemv.h"

static float
f16_to_f32(uint16_t h)
{
	_Float16 v;

	memcpy(&v, &h, sizeof(v));
	return (float)v;
}

static int
mat_alloc(struct mat *m, const struct gemm *g, int rows, int cols, char *err)
{
	size_t n = (size_t)rows * cols;

	memset(m, 0, sizeof(*m));
	m->rows = rows;
	m->cols = cols;
	if (gemm_precision(g) == SOTTO_PRECISION_BF16)
		m->bf16 = aligned_alloc(64, (n * 2 + 63) & ~(size_t)63);
	else
		m->f32 = aligned_alloc(64, (n * 4 + 63) & ~(size_t)63);
	if (m->bf16 == NULL && m->f32 == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory for a "
		    "%dx%d weight", rows, cols);
	return 0;
}

/*
 * F16 -> f32 of a block. The generic build converts in software (slow:
 * a model load spent most of its time here); x86-64-v3 has F16C.
 */
__attribute__((target_clones("arch=x86-64-v3", "default"))) static void
f16_block(const unsigned char *p, float *out, size_t n)
{
	uint16_t h;
	size_t i;

	for (i = 0; i < n; i++) {
		memcpy(&h, p + 2 * i, 2);
		out[i] = f16_to_f32(h);
	}
}

/*
 * F16 -> bf16 (nearest even, as bf16_round) of n values. Only bf16
 * models call it, and they run only on CPUs with AVX512-BF16.
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void
f16_to_bf16(const unsigned char *p, uint16_t *out, size_t n)
{
	size_t i = 0;

	for (; i + 16 <= n; i += 16)
		_mm256_storeu_si256((__m256i *)(out + i),
		    (__m256i)_mm512_cvtneps_pbh(_mm512_cvtph_ps(
		    _mm256_loadu_si256((const __m256i *)(p + 2 * i)))));
	for (; i < n; i++) {
		uint16_t h;

		memcpy(&h, p + 2 * i, 2);
		out[i] = bf16_round(f16_to_f32(h));
	}
}

/*
 * Convert n F16 values into m from element at. Loading a model is mostly
 * this conversion (and the page faults of reading the mapped file), so
 * both threads share it: base loaded in 240 ms with one.
 */
#define FILL_CHUNK	((size_t)1 << 15)

static void
mat_fill(struct mat *m, size_t at, const void *f16, size_t n)
{
	const unsigned char *p = f16;
	long long c, chunks = (long long)((n + FILL_CHUNK - 1) / FILL_CHUNK);

#pragma omp parallel for schedule(static) if (chunks > 1)
	for (c = 0; c < chunks; c++) {
		size_t i = (size_t)c * FILL_CHUNK;
		size_t k = n - i < FILL_CHUNK ? n - i : FILL_CHUNK;

		if (m->f32 != NULL)
			f16_block(p + 2 * i, m->f32 + at + i, k);
		else
			f16_to_bf16(p + 2 * i, m->bf16 + at + i, k);
	}
}

int
mat_init_f16_stack(struct mat *m, const struct gemm *g,
    const void *const *blocks, const int *block_rows, int n_blocks, int cols,
    char *err)
{
	size_t at = 0;
	int i, rows = 0, rc;

	for (i = 0; i < n_blocks; i++)
		rows += block_rows[i];
	if (n_blocks > 3)
		return err_set(err, SOTTO_EINVAL, "%d blocks in one matrix",
		    n_blocks);
	if ((rc = mat_alloc(m, g, rows, cols, err)) != 0)
		return rc;
	for (i = 0; i < n_blocks; i++) {
		m->src[i] = blocks[i];
		m->src_rows[i] = block_rows[i];
	}
	m->n_src = n_blocks;
	for (i = 0; i < n_blocks; i++) {
		mat_fill(m, at, blocks[i], (size_t)block_rows[i] * cols);
		at += (size_t)block_rows[i] * cols;
	}
	return 0;
}

/*
 * bf16: rows [m0, m0 + 16) of the F16 blocks straight into gemv.c's
 * packed layout (16 rows x 32 k per tile, rows past the end zero).
 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void
pack_block16(const void *const *blocks, const int *block_rows, int n_blocks,
    int rows, int cols, int m0, uint16_t *out)
{
	int i, c, b, r;

	for (i = 0; i < 16; i++) {
		const uint16_t *src = NULL;

		for (b = 0, r = m0 + i; b < n_blocks && src == NULL; b++) {
			if (r < block_rows[b])
				src = (const uint16_t *)blocks[b] +
				    (size_t)r * cols;
			r -= block_rows[b];
		}
		for (c = 0; c < cols / 32; c++) {
			uint16_t *o = out + (((size_t)(m0 / 16) * (cols / 32) +
			    c) * 16 + i) * 32;
			__m512 lo, hi;

			if (src == NULL || m0 + i >= rows) {
				memset(o, 0, 64);
				continue;
			}
			lo = _mm512_cvtph_ps(_mm256_loadu_si256(
			    (const __m256i *)(src + 32 * c)));
			hi = _mm512_cvtph_ps(_mm256_loadu_si256(
			    (const __m256i *)(src + 32 * c + 16)));
			_mm512_storeu_si512(o, (__m512i)_mm512_cvtne2ps_pbh(hi,
			    lo));
		}
	}
}

int
mat_init_packed_stack(struct mat *m, const struct gemm *g,
    const void *const *blocks, const int *block_rows, int n_blocks, int cols,
    char *err)
{
	long long mb;
	int i, rows = 0;

	if (gemm_precision(g) != SOTTO_PRECISION_BF16 ||
	    cols % GEMV_K_ALIGN != 0 || n_blocks > 3)
		return mat_init_f16_stack(m, g, blocks, block_rows, n_blocks,
		    cols, err);
	for (i = 0; i < n_blocks; i++)
		rows += block_rows[i];
	memset(m, 0, sizeof(*m));
	m->rows = rows;
	m->cols = cols;
	m->packed = aligned_alloc(64, gemv_packed_elems(rows, cols) * 2);
	if (m->packed == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory for a "
		    "%dx%d weight", rows, cols);
#pragma omp parallel for schedule(static)
	for (mb = 0; mb < (rows + 15) / 16; mb++)
		pack_block16(blocks, block_rows, n_blocks, rows, cols,
		    (int)mb * 16, m->packed);
	return 0;
}

int
mat_init_f16(struct mat *m, const struct gemm *g, const void *f16, int rows,
    int cols, char *err)
{
	return mat_init_f16_stack(m, g, &f16, &rows, 1, cols, err);
}

int
mat_init_i8_stack(struct mat *m, const void *const *blocks,
    const int *block_rows, int n_blocks, int cols, int window, char *err)
{
	int i, rows = 0;

	memset(m, 0, sizeof(*m));
	for (i = 0; i < n_blocks; i++)
		rows += block_rows[i];
	if (!mat_i8_fits(rows, cols))
		return err_set(err, SOTTO_EINVAL, "a %dx%d weight cannot be "
		    "int8 (sides must be multiples of %d)", rows, cols,
		    GEMV_I8_ALIGN);
	m->rows = rows;
	m->cols = cols;
	m->i8 = aligned_alloc(64, gemv_i8_bytes(rows, cols));
	m->i8_scale = malloc((size_t)rows * sizeof(float));
	if (window)
		m->i8_rowsum = malloc((size_t)rows * sizeof(int32_t));
	if (m->i8 == NULL || m->i8_scale == NULL ||
	    (window && m->i8_rowsum == NULL)) {
		mat_free(m);
		return err_set(err, SOTTO_ENOMEM, "out of memory for a "
		    "%dx%d weight", rows, cols);
	}
	for (rows = 0, i = 0; i < n_blocks; rows += block_rows[i++])
		gemv_i8_pack(blocks[i], block_rows[i], cols, rows, m->i8,
		    m->i8_scale, m->i8_rowsum);
	return 0;
}

int
mat_i8_fits(int rows, int cols)
{
	return rows % GEMV_I8_ALIGN == 0 && cols % GEMV_I8_ALIGN == 0;
}

int
mat_init_i8_avx2_stack(struct mat *m, const void *const *blocks,
    const int *block_rows, int n_blocks, int cols, char *err)
{
	size_t bytes;
	int i, rows = 0, padded;

	memset(m, 0, sizeof(*m));
	for (i = 0; i < n_blocks; i++)
		rows += block_rows[i];
	if (!mat_i8_avx2_fits(cols))
		return err_set(err, SOTTO_EINVAL, "a %dx%d weight cannot be "
		    "int8 (its width must be a multiple of %d)", rows, cols,
		    GEMV_I8_ALIGN);
	padded = gemv_i8_avx2_rows(rows);
	bytes = gemv_i8_avx2_bytes(rows, cols);
	m->rows = rows;
	m->cols = cols;
	m->i8_avx2 = 1;
	m->i8 = aligned_alloc(64, bytes);
	m->i8_scale = calloc((size_t)padded, sizeof(float));
	if (m->i8 == NULL || m->i8_scale == NULL) {
		mat_free(m);
		return err_set(err, SOTTO_ENOMEM, "out of memory for a "
		    "%dx%d weight", rows, cols);
	}
	/* the padding rows, spread over the last block, are zeros */
	memset(m->i8, 0, bytes);
	for (rows = 0, i = 0; i < n_blocks; rows += block_rows[i++])
		gemv_i8_avx2_pack(blocks[i], block_rows[i], cols, rows, m->i8,
		    m->i8_scale);
	return 0;
}

int
mat_i8_avx2_fits(int cols)
{
	return cols % GEMV_I8_ALIGN == 0;
}

int
mat_init_i8_rows_stack(struct mat *m, const void *const *blocks,
    const int *block_rows, int n_blocks, int cols, char *err)
{
	int i, rows = 0;

	memset(m, 0, sizeof(*m));
	for (i = 0; i < n_blocks; i++)
		rows += block_rows[i];
	if (!mat_i8_rows_fits(rows))
		return err_set(err, SOTTO_EINVAL, "a %dx%d weight cannot be "
		    "int8 (its height must be a multiple of 8)", rows, cols);
	m->rows = rows;
	m->cols = cols;
	m->i8_rows = 1;
	m->i8 = aligned_alloc(64, ((size_t)rows * cols + 63) / 64 * 64);
	m->i8_scale = malloc((size_t)rows * sizeof(float));
	m->i8_rowsum = malloc((size_t)rows * sizeof(int32_t));
	if (m->i8 == NULL || m->i8_scale == NULL || m->i8_rowsum == NULL) {
		mat_free(m);
		return err_set(err, SOTTO_ENOMEM, "out of memory for a "
		    "%dx%d weight", rows, cols);
	}
	for (rows = 0, i = 0; i < n_blocks; rows += block_rows[i++])
		u8_gemm_pack(blocks[i], block_rows[i], cols, rows,
		    (int8_t *)m->i8, m->i8_scale, m->i8_rowsum);
	return 0;
}

int
mat_i8_rows_fits(int rows)
{
	return rows % 8 == 0;
}

/*
 * fp32: the F16 rows for gemv_f16, the GGUF's own when the matrix is
 * one tensor, else a copy of its blocks side by side.
 */
static int
mat_f16_rows(struct mat *m, char *err)
{
	size_t at = 0;
	int i;

	if (m->n_src == 1) {
		m->f16 = m->src[0];
		return 0;
	}
	m->f16_owned = malloc((size_t)m->rows * m->cols * 2);
	if (m->f16_owned == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory for a "
		    "%dx%d weight", m->rows, m->cols);
	for (i = 0; i < m->n_src; i++) {
		memcpy(m->f16_owned + at, m->src[i], (size_t)m->src_rows[i] *
		    m->cols * 2);
		at += (size_t)m->src_rows[i] * m->cols;
	}
	m->f16 = m->f16_owned;
	return 0;
}

int
mat_pack(struct mat *m, const struct gemm *g, int window, char *err)
{
	uint16_t *p;

	if (m->i8 != NULL || m->packed != NULL)
		return 0;
	if (gemm_precision(g) != SOTTO_PRECISION_BF16)
		return window ? 0 : mat_f16_rows(m, err);
	if (!window && m->cols % GEMV_K_ALIGN != 0)
		return 0;
	p = aligned_alloc(64, gemv_packed_elems(m->rows, m->cols) * 2);
	if (p == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory for a "
		    "%dx%d weight", m->rows, m->cols);
	gemv_pack(m->bf16, m->rows, m->cols, p);
	free(m->bf16);
	m->bf16 = NULL;
	m->packed = p;
	return 0;
}

void
mat_drop_f32(struct mat *m)
{
	if (m->f16 == NULL)
		return;
	free(m->f32);
	m->f32 = NULL;
}

void
mat_free(struct mat *m)
{
	free(m->f32);
	free(m->bf16);
	free(m->packed);
	free(m->f16_owned);
	free(m->i8);
	free(m->i8_scale);
	free(m->i8_rowsum);
	memset(m, 0, sizeof(*m));
}
