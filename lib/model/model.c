/*
 * Loading a model: validate the GGUF's hyper-parameters, build the
 * tokenizer, and bind every tensor (docs/model-format.md), converting the
 * F16 matrices once into the precision the compute backend runs in. The
 * file's memory that nothing reads after the load is then given back
 * (gguf_release): the model never reads the file itself again.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "gemm.h"
#include "gemv.h"
#include "gguf.h"
#include "logits.h"
#include "model.h"
#include "tokenizer.h"

/* Binding state: the first error sticks and later lookups do nothing. */
struct loader {
	struct sotto_model *m;
	char *err;
	int rc;
	char name[96];
};

/* "enc.3.attn.q.w" from ("enc", 3, "attn.q.w"). */
static const char *
lname(struct loader *ld, const char *part, int layer, const char *what)
{
	snprintf(ld->name, sizeof(ld->name), "%s.%d.%s", part, layer, what);
	return ld->name;
}

/* Keep the tensor holding p after the load (gguf_retain). */
static void
keep(struct loader *ld, const void *p)
{
	if (ld->rc == 0 && p != NULL &&
	    (ld->rc = gguf_retain(ld->m->gguf, p)) != 0)
		err_set(ld->err, ld->rc, "%s: %s", gguf_path(ld->m->gguf),
		    ld->rc == SOTTO_ENOMEM ? "out of memory" :
		    "a tensor kept after it was given back (a bug)");
}

/*
 * The tensor holding p is converted and not read again: its memory goes
 * back now (gguf_drop), so a load holds about one copy of the model, not
 * the file and its conversion (3.2 GB at its peak for large-v3-turbo).
 */
static void
done(struct loader *ld, const void *p)
{
	if (ld->rc == 0 && p != NULL &&
	    (ld->rc = gguf_drop(ld->m->gguf, p)) != 0)
		err_set(ld->err, ld->rc, "%s: %s", gguf_path(ld->m->gguf),
		    ld->rc == SOTTO_ENOMEM ? "out of memory" :
		    "a kept tensor given back (a bug)");
}

/* A tensor's data, read during the load only (converted). */
static const void *
source(struct loader *ld, const char *name, enum gguf_dtype type, int n_dims,
    int64_t d0, int64_t d1, int64_t d2)
{
	const struct gguf_tensor *t;
	int64_t dims[3] = { d0, d1, d2 };

	if (ld->rc != 0)
		return NULL;
	ld->rc = gguf_expect_tensor(ld->m->gguf, name, type, n_dims, dims, &t,
	    ld->err);
	return ld->rc == 0 ? t->data : NULL;
}

/* A tensor's data, read in place after the load too. */
static const void *
tensor(struct loader *ld, const char *name, enum gguf_dtype type, int n_dims,
    int64_t d0, int64_t d1, int64_t d2)
{
	const void *p = source(ld, name, type, n_dims, d0, d1, d2);

	keep(ld, p);
	return p;
}

static const float *
vec(struct loader *ld, const char *name, int n)
{
	return tensor(ld, name, GGUF_DTYPE_F32, 1, n, 0, 0);
}

/* How a matrix is converted (matrix(), mat_stack()). */
#define ROWS_KEPT	1	/* fp32 decoder: its steps read the F16 rows */
#define INT8		2	/* precision int8 decoder: int8 weights */
#define INT8_WIN	4	/* precision int8 encoder: int8 weights for
				   products over the window */

/* F16 blocks stacked row-wise into out, as flags say. */
static void
convert(struct loader *ld, struct mat *out, const void *const *blocks,
    const int *rows, int n, int cols, int flags)
{
	int i, all = 0;

	for (i = 0; i < n; i++)
		all += rows[i];
	if (ld->rc != 0)
		return;
	if ((flags & INT8_WIN) && ld->m->int8_avx2 && mat_i8_rows_fits(all))
		ld->rc = mat_init_i8_rows_stack(out, blocks, rows, n, cols,
		    ld->err);
	else if ((flags & INT8) && ld->m->int8_avx2 &&
	    mat_i8_avx2_fits(cols))
		ld->rc = mat_init_i8_avx2_stack(out, blocks, rows, n, cols,
		    ld->err);
	else if ((flags & (INT8 | INT8_WIN)) && !ld->m->int8_avx2 &&
	    mat_i8_fits(all, cols))
		ld->rc = mat_init_i8_stack(out, blocks, rows, n, cols,
		    (flags & INT8_WIN) != 0, ld->err);
	else
		ld->rc = mat_init_packed_stack(out, ld->m->gemm, blocks, rows,
		    n, cols, ld->err);
}

/*
 * A matrix converted from its F16 tensor; the tensor is given back at
 * once unless ROWS_KEPT.
 */
static void
matrix(struct loader *ld, struct mat *out, const char *name, int rows, int cols,
    int flags)
{
	const void *p = source(ld, name, GGUF_DTYPE_F16, 2, rows, cols, 0);

	convert(ld, out, &p, &rows, 1, cols, flags);
	if (!(flags & ROWS_KEPT))
		done(ld, p);
}

/*
 * Stack the F16 matrices part.N.attn.{names[i]}.w into one [n*d][d];
 * given back at once unless ROWS_KEPT (an fp32 decoder's F16 rows are
 * copied from them when its weights are packed).
 */
static void
mat_stack(struct loader *ld, struct mat *out, const char *part, int layer,
    const char *attn, const char *const *names, int n, int d, int flags)
{
	const void *blocks[3];
	int rows[3], i;
	char what[64];

	for (i = 0; i < n; i++) {
		snprintf(what, sizeof(what), "%s.%s.w", attn, names[i]);
		blocks[i] = source(ld, lname(ld, part, layer, what),
		    GGUF_DTYPE_F16, 2, d, d, 0);
		rows[i] = d;
	}
	convert(ld, out, blocks, rows, n, d, flags);
	for (i = 0; i < n && !(flags & ROWS_KEPT); i++)
		done(ld, blocks[i]);
}

/* Bias of a stacked projection; a NULL name is a block of zeros (key). */
static float *
bias_stack(struct loader *ld, const char *part, int layer, const char *attn,
    const char *const *names, int n, int d)
{
	float *b;
	char what[64];
	int i;

	if (ld->rc != 0)
		return NULL;
	if ((b = calloc((size_t)n * d, sizeof(*b))) == NULL) {
		ld->rc = err_set(ld->err, SOTTO_ENOMEM, "out of memory");
		return NULL;
	}
	for (i = 0; i < n; i++) {
		const float *src;

		if (names[i] == NULL)
			continue;
		snprintf(what, sizeof(what), "%s.%s.b", attn, names[i]);
		if ((src = vec(ld, lname(ld, part, layer, what), d)) != NULL)
			memcpy(b + (size_t)i * d, src, d * sizeof(*b));
	}
	return b;
}

/* conv.w [3][d][cin] (tap-major) -> [d][3 * cin], taps side by side. */
static void
conv_weight(struct loader *ld, struct mat *out, const char *name, int d,
    int cin)
{
	const unsigned char *p;
	unsigned char *tmp;
	int tap, r;

	p = source(ld, name, GGUF_DTYPE_F16, 3, 3, d, cin);
	if (p == NULL)
		return;
	if ((tmp = malloc((size_t)3 * d * cin * 2)) == NULL) {
		ld->rc = err_set(ld->err, SOTTO_ENOMEM, "out of memory");
		return;
	}
	for (tap = 0; tap < 3; tap++)
		for (r = 0; r < d; r++)
			memcpy(tmp + ((size_t)r * 3 * cin + (size_t)tap * cin) * 2,
			    p + (((size_t)tap * d + r) * cin) * 2,
			    (size_t)cin * 2);
	done(ld, p);
	convert(ld, out, (const void *const *)&tmp, &d, 1, 3 * cin, 0);
	free(tmp);
}

static const char *const qkv_names[] = { "q", "k", "v" };
static const char *const qkv_bias[] = { "q", NULL, "v" };
static const char *const kv_names[] = { "k", "v" };
static const char *const kv_bias[] = { NULL, "v" };

static void
bind_encoder_layer(struct loader *ld, int i, struct enc_layer *l)
{
	int d = ld->m->hp.n_audio_state;
	/* int8 on AVX2 (gemm-u8.c): out, fc1 and fc2, q/k/v stay fp32 */
	int flags = ld->m->int8 || ld->m->int8_avx2 ? INT8_WIN : 0;

	l->attn_ln_w = vec(ld, lname(ld, "enc", i, "attn_ln.w"), d);
	l->attn_ln_b = vec(ld, lname(ld, "enc", i, "attn_ln.b"), d);
	mat_stack(ld, &l->qkv, "enc", i, "attn", qkv_names, 3, d,
	    ld->m->int8_avx2 ? 0 : flags);
	l->qkv_b = bias_stack(ld, "enc", i, "attn", qkv_bias, 3, d);
	matrix(ld, &l->o, lname(ld, "enc", i, "attn.o.w"), d, d, flags);
	l->o_b = vec(ld, lname(ld, "enc", i, "attn.o.b"), d);
	l->mlp_ln_w = vec(ld, lname(ld, "enc", i, "mlp_ln.w"), d);
	l->mlp_ln_b = vec(ld, lname(ld, "enc", i, "mlp_ln.b"), d);
	matrix(ld, &l->fc1, lname(ld, "enc", i, "mlp.fc1.w"), 4 * d, d, flags);
	l->fc1_b = vec(ld, lname(ld, "enc", i, "mlp.fc1.b"), 4 * d);
	matrix(ld, &l->fc2, lname(ld, "enc", i, "mlp.fc2.w"), d, 4 * d, flags);
	l->fc2_b = vec(ld, lname(ld, "enc", i, "mlp.fc2.b"), d);
}

static void
bind_decoder_layer(struct loader *ld, int i, struct dec_layer *l)
{
	int d = ld->m->hp.n_text_state;
	/* ROWS_KEPT (fp32: keep_rows) or INT8 (on AVX2 both: a weight int8
	 * cannot take stays fp32); not for the cross K/V, a product over
	 * the window that stays bf16 or fp32 (on AVX2 gemm-u8.c's, as the
	 * encoder's: tiny.en and base kept their WER within a word) */
	int flags = ld->m->int8_avx2 ? INT8 | ROWS_KEPT :
	    ld->m->precision != SOTTO_PRECISION_BF16 ? ROWS_KEPT :
	    ld->m->int8 ? INT8 : 0;
	/*
	 * On AVX2 fc2 stays fp32 (its F16 rows): with it in int8 too,
	 * tiny.en greedy's WER on the test set went from fp32's 1.38% to
	 * 2.52% (2 of 15 files changed); with fc2 fp32, 1.61% (1 file), for
	 * 2.4 MB more a token (tiny.en). fc2 reads the GELU's hidden layer
	 * (4d wide) through one scale per row.
	 */
	int fc2_flags = ld->m->int8_avx2 ? ROWS_KEPT : flags;

	l->attn_ln_w = vec(ld, lname(ld, "dec", i, "attn_ln.w"), d);
	l->attn_ln_b = vec(ld, lname(ld, "dec", i, "attn_ln.b"), d);
	mat_stack(ld, &l->qkv, "dec", i, "attn", qkv_names, 3, d, flags);
	l->qkv_b = bias_stack(ld, "dec", i, "attn", qkv_bias, 3, d);
	matrix(ld, &l->o, lname(ld, "dec", i, "attn.o.w"), d, d, flags);
	l->o_b = vec(ld, lname(ld, "dec", i, "attn.o.b"), d);
	l->cross_ln_w = vec(ld, lname(ld, "dec", i, "cross_ln.w"), d);
	l->cross_ln_b = vec(ld, lname(ld, "dec", i, "cross_ln.b"), d);
	matrix(ld, &l->cq, lname(ld, "dec", i, "cross.q.w"), d, d, flags);
	l->cq_b = vec(ld, lname(ld, "dec", i, "cross.q.b"), d);
	mat_stack(ld, &l->ckv, "dec", i, "cross", kv_names, 2, d,
	    ld->m->int8_avx2 ? INT8_WIN : 0);
	l->ckv_b = bias_stack(ld, "dec", i, "cross", kv_bias, 2, d);
	matrix(ld, &l->co, lname(ld, "dec", i, "cross.o.w"), d, d, flags);
	l->co_b = vec(ld, lname(ld, "dec", i, "cross.o.b"), d);
	l->mlp_ln_w = vec(ld, lname(ld, "dec", i, "mlp_ln.w"), d);
	l->mlp_ln_b = vec(ld, lname(ld, "dec", i, "mlp_ln.b"), d);
	matrix(ld, &l->fc1, lname(ld, "dec", i, "mlp.fc1.w"), 4 * d, d, flags);
	l->fc1_b = vec(ld, lname(ld, "dec", i, "mlp.fc1.b"), 4 * d);
	matrix(ld, &l->fc2, lname(ld, "dec", i, "mlp.fc2.w"), d, 4 * d,
	    fc2_flags);
	l->fc2_b = vec(ld, lname(ld, "dec", i, "mlp.fc2.b"), d);
}

/*
 * The output head is logits.c's 4-bit one (not tok_emb's products): in
 * bf16 on AMX or AVX512-VNNI, and in int8 on AVX2, where it replaced an
 * int8 head (gemv-i8-avx2.c) at half the bytes and, for beams, half the
 * instructions.
 */
static int
head4(const struct sotto_model *m)
{
	return m->hp.n_text_state % 64 == 0 && (m->int8_avx2 ||
	    (m->precision == SOTTO_PRECISION_BF16 &&
	    (gemm_has_amx(m->gemm) || logits_head_vnni())));
}

static enum logits_kernel
head4_kernel(const struct sotto_model *m)
{
	return m->int8_avx2 ? LOGITS_AVX2 : gemm_has_amx(m->gemm) ?
	    LOGITS_AMX : LOGITS_VNNI;
}

/*
 * Weights into the blocks their products read: the decoder's per-token
 * products (gemv.c), the products over a window (gemm-win.h), and the
 * 4-bit output head (logits.c).
 */
static void
pack_weights(struct loader *ld)
{
	struct sotto_model *m = ld->m;
	int i, j;

	for (i = 0; i < m->hp.n_text_layer && ld->rc == 0; i++) {
		struct dec_layer *l = &m->dec[i];
		struct mat *mats[] = { &l->qkv, &l->o, &l->cq, &l->co, &l->fc1,
		    &l->fc2 };

		for (j = 0; j < 6 && ld->rc == 0; j++)
			ld->rc = mat_pack(mats[j], m->gemm, 0, ld->err);
		if (ld->rc == 0)
			ld->rc = mat_pack(&l->ckv, m->gemm, 1, ld->err);
	}
	if (ld->rc == 0 && head4(m)) {
		ld->rc = logits_head_new(m->tok_emb_f16, m->hp.n_vocab,
		    m->hp.n_text_state, head4_kernel(m), &m->head,
		    ld->err);
	} else if (ld->rc == 0) {
		ld->rc = mat_pack(&m->tok_emb, m->gemm, 0, ld->err);
		/* fp32: the head reads the F16 embedding, half the bytes */
		mat_drop_f32(&m->tok_emb);
	}
	for (i = 0; i < m->hp.n_audio_layer && ld->rc == 0; i++) {
		struct enc_layer *l = &m->enc[i];
		struct mat *mats[] = { &l->qkv, &l->o, &l->fc1, &l->fc2 };

		for (j = 0; j < 4 && ld->rc == 0; j++)
			ld->rc = mat_pack(mats[j], m->gemm, 1, ld->err);
	}
	if (ld->rc == 0)
		ld->rc = mat_pack(&m->conv1, m->gemm, 1, ld->err);
	if (ld->rc == 0)
		ld->rc = mat_pack(&m->conv2, m->gemm, 1, ld->err);
}

/* fp32: the decoder's F16 rows that gemv-f16.c reads in place. */
static void
keep_rows(struct loader *ld, const struct mat *w)
{
	if (w->f16 != NULL && w->f16_owned == NULL)
		keep(ld, w->f16);
}

/*
 * Give back the file's memory that is not read after the load: all but
 * the header, the tensors bound in place (vectors, tables, positions,
 * the F16 token embedding) and the F16 rows of an fp32 decoder.
 */
static void
release_file(struct loader *ld)
{
	struct sotto_model *m = ld->m;
	int i, j;

	for (i = 0; i < m->hp.n_text_layer; i++) {
		const struct dec_layer *l = &m->dec[i];
		const struct mat *mats[] = { &l->qkv, &l->o, &l->cq, &l->ckv,
		    &l->co, &l->fc1, &l->fc2 };

		for (j = 0; j < 7; j++)
			keep_rows(ld, mats[j]);
	}
	keep_rows(ld, &m->tok_emb);
	if (ld->rc == 0)
		gguf_release(m->gguf);
}

static void
bind_tensors(struct loader *ld)
{
	struct sotto_model *m = ld->m;
	const struct hparams *hp = &m->hp;
	int da = hp->n_audio_state, dt = hp->n_text_state, i;

	m->mel_filters = tensor(ld, "mel.filters", GGUF_DTYPE_F32, 2,
	    hp->n_mels, WHISPER_N_FFT / 2 + 1, 0);
	conv_weight(ld, &m->conv1, "enc.conv1.w", da, hp->n_mels);
	m->conv1_b = vec(ld, "enc.conv1.b", da);
	conv_weight(ld, &m->conv2, "enc.conv2.w", da, da);
	m->conv2_b = vec(ld, "enc.conv2.b", da);
	m->enc_pos = tensor(ld, "enc.pos", GGUF_DTYPE_F32, 2, da,
	    hp->n_audio_ctx, 0);
	for (i = 0; i < hp->n_audio_layer; i++)
		bind_encoder_layer(ld, i, &m->enc[i]);
	m->ln_post_w = vec(ld, "enc.ln_post.w", da);
	m->ln_post_b = vec(ld, "enc.ln_post.b", da);

	m->tok_emb_f16 = tensor(ld, "dec.tok_emb", GGUF_DTYPE_F16, 2,
	    hp->n_vocab, dt, 0);
	/* the 4-bit head is made from the F16 rows, which it keeps */
	if (m->tok_emb_f16 != NULL && m->int8_avx2 && !head4(m)) {
		convert(ld, &m->tok_emb, (const void *const *)&m->tok_emb_f16,
		    &hp->n_vocab, 1, dt, INT8);
		/* its top logits again from the F16 rows (gemm_xtw) */
		if (ld->rc == 0 && m->tok_emb.i8 != NULL)
			m->tok_emb.f16 = m->tok_emb_f16;
	}
	else if (m->tok_emb_f16 != NULL && !head4(m))
		ld->rc = mat_init_f16(&m->tok_emb, m->gemm, m->tok_emb_f16,
		    hp->n_vocab, dt, ld->err);
	m->dec_pos = tensor(ld, "dec.pos", GGUF_DTYPE_F32, 2, hp->n_text_ctx,
	    dt, 0);
	for (i = 0; i < hp->n_text_layer; i++)
		bind_decoder_layer(ld, i, &m->dec[i]);
	m->dec_ln_w = vec(ld, "dec.ln.w", dt);
	m->dec_ln_b = vec(ld, "dec.ln.b", dt);
	pack_weights(ld);
}

void
sotto_model_params_init(struct sotto_model_params *p)
{
	memset(p, 0, sizeof(*p));
	p->precision = SOTTO_PRECISION_AUTO;
}

int
sotto_model_load(const char *path, const struct sotto_model_params *params,
    struct sotto_model **ret, char *err)
{
	struct sotto_model_params defaults;
	struct sotto_model *m;
	struct loader ld = { 0 };
	int rc;

	*ret = NULL;
	if (params == NULL) {
		sotto_model_params_init(&defaults);
		params = &defaults;
	}
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	if ((rc = gguf_open(path, &m->gguf, err)) != 0 ||
	    (rc = model_read_meta(m, err)) != 0 ||
	    (rc = model_compute_setup(m, params, err)) != 0) {
		sotto_model_free(m);
		return rc;
	}
	m->enc = calloc(m->hp.n_audio_layer, sizeof(*m->enc));
	m->dec = calloc(m->hp.n_text_layer, sizeof(*m->dec));
	if (m->enc == NULL || m->dec == NULL) {
		sotto_model_free(m);
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	}
	ld.m = m;
	ld.err = err;
	bind_tensors(&ld);
	release_file(&ld);
	if (ld.rc != 0) {
		sotto_model_free(m);
		return ld.rc;
	}
	*ret = m;
	return 0;
}

/* Whether m can transcribe language (a code, or NULL/"auto") for task. */
static int
check_language(const struct sotto_model *m, const char *language,
    enum sotto_task task, char *err)
{
	int auto_lang = language == NULL || strcmp(language, "auto") == 0;

	if (!m->multilingual) {
		if (!auto_lang && strcmp(language, "en") != 0)
			return err_set(err, SOTTO_EINVAL, "model %s is "
			    "English-only; it cannot transcribe \"%s\"",
			    m->name, language);
		if (task == SOTTO_TASK_TRANSLATE)
			return err_set(err, SOTTO_EINVAL, "model %s is "
			    "English-only; it cannot translate", m->name);
		return 0;
	}
	if (!auto_lang && tok_language_index(m->tok, language) < 0)
		return err_set(err, SOTTO_EINVAL, "model %s has no language "
		    "\"%s\"", m->name, language);
	return 0;
}

int
sotto_model_check(const char *path, const char *language,
    enum sotto_task task, char *err)
{
	struct sotto_model *m;
	int rc;

	if ((m = calloc(1, sizeof(*m))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	if ((rc = gguf_open(path, &m->gguf, err)) == 0 &&
	    (rc = model_read_meta(m, err)) == 0)
		rc = check_language(m, language, task, err);
	sotto_model_free(m);
	return rc;
}

static void
free_layers(struct sotto_model *m)
{
	int i;

	for (i = 0; m->enc != NULL && i < m->hp.n_audio_layer; i++) {
		mat_free(&m->enc[i].qkv);
		free(m->enc[i].qkv_b);
		mat_free(&m->enc[i].o);
		mat_free(&m->enc[i].fc1);
		mat_free(&m->enc[i].fc2);
	}
	for (i = 0; m->dec != NULL && i < m->hp.n_text_layer; i++) {
		mat_free(&m->dec[i].qkv);
		free(m->dec[i].qkv_b);
		mat_free(&m->dec[i].o);
		mat_free(&m->dec[i].cq);
		mat_free(&m->dec[i].ckv);
		free(m->dec[i].ckv_b);
		mat_free(&m->dec[i].co);
		mat_free(&m->dec[i].fc1);
		mat_free(&m->dec[i].fc2);
	}
	free(m->enc);
	free(m->dec);
}

void
sotto_model_free(struct sotto_model *m)
{
	if (m == NULL)
		return;
	free_layers(m);
	mat_free(&m->conv1);
	mat_free(&m->conv2);
	mat_free(&m->tok_emb);
	logits_head_free(m->head);
	free(m->suppress);
	free(m->suppress_begin);
	free(m->align_heads);
	tok_free(m->tok);
	gemm_free(m->gemm);
	gguf_close(m->gguf);
	free(m);
}

void
sotto_model_info(const struct sotto_model *m, struct sotto_model_info *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->name = m->name;
	ret->n_mels = m->hp.n_mels;
	ret->n_audio_state = m->hp.n_audio_state;
	ret->n_audio_layer = m->hp.n_audio_layer;
	ret->n_audio_head = m->hp.n_audio_head;
	ret->n_text_state = m->hp.n_text_state;
	ret->n_text_layer = m->hp.n_text_layer;
	ret->n_text_head = m->hp.n_text_head;
	ret->n_vocab = m->hp.n_vocab;
	ret->multilingual = m->multilingual;
	ret->precision = m->int8 || m->int8_avx2 ? SOTTO_PRECISION_INT8 :
	    m->precision;
	ret->threads = m->threads;
	ret->compute = model_compute_name(m);
}

const char *
sotto_language_code(const struct sotto_model *m, int index)
{
	return tok_language_code(m->tok, index);
}

int
sotto_language_count(const struct sotto_model *m)
{
	return tok_n_languages(m->tok);
}
