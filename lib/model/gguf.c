/*
 * GGUF reader.
 *
 * The file (little-endian) is: magic "GGUF", u32 version, u64 n_tensors,
 * u64 n_kv; n_kv x {string key, u32 type, value}; n_tensors x {string
 * name, u32 n_dims, u64 ne[n_dims] (innermost first), u32 ggml type, u64
 * offset}; padding to general.alignment; the tensor data. A string is a
 * u64 length and that many bytes; an array is a u32 element type, a u64
 * count and the elements.
 *
 * Nothing is trusted: every read goes through a cursor that checks the
 * bytes left, counts are bounded by the file size before anything is
 * allocated, and all products are overflow checked. So a truncated or
 * hostile file is an SOTTO_EFORMAT message, never an out-of-bounds read
 * or a huge allocation. Values are decoded with memcpy, never through
 * unaligned pointers.
 *
 * The file is read into memory of our own (gguf-load.c), never mapped:
 * a file replaced or truncated while a program uses it cannot change
 * what the program computes or kill it with SIGBUS.
 *
 * The index points into that memory: key/values sorted by key, tensors
 * in file order plus an array of pointers sorted by name, both searched
 * with bsearch().
 */
#include <sys/mman.h>
#include <sys/stat.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "gguf.h"

#include "gguf-private.h"

const uint8_t gguf_type_bytes[] = {
	1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8
};

const char *const gguf_type_names[] = {
	"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string",
	"array", "u64", "i64", "f64"
};

/* A cursor over the file; ctx names what is being read, for messages. */
struct gguf_rd {
	const struct gguf *g;
	size_t		 pos;
	const char	*what;
	struct gguf_str	 ctx;
	char		*err;
};

const char *
gguf_dtype_name(enum gguf_dtype t)
{
	return t == GGUF_DTYPE_F16 ? "F16" : "F32";
}

const char *
gguf_path(const struct gguf *g)
{
	return g->path;
}

/*
 * Decode an n-byte (n <= 8) little-endian unsigned integer at p: the
 * bytes land at the low addresses of a zeroed u64, which le64toh() reads
 * as little-endian on any host.
 */
uint64_t
gguf_le(const unsigned char *p, size_t n)
{
	uint64_t v = 0;

	memcpy(&v, p, n);
	return le64toh(v);
}

static int
gguf_rd_need(struct gguf_rd *rd, uint64_t n)
{
	const struct gguf *g = rd->g;

	if (n <= g->size - rd->pos)
		return 0;
	return err_set(rd->err, SOTTO_EFORMAT, "%s: truncated at byte %zu "
	    "reading %s%s%.*s (file is %zu bytes); re-download or "
	    "re-convert the model", g->path, rd->pos, rd->what,
	    rd->ctx.len > 0 ? " of " : "", GGUF_PR(rd->ctx), g->size);
}

static int
gguf_rd_uint(struct gguf_rd *rd, size_t n, uint64_t *ret, const char *what)
{
	int rv;

	rd->what = what;
	if ((rv = gguf_rd_need(rd, n)) != 0)
		return rv;
	*ret = gguf_le(rd->g->base + rd->pos, n);
	rd->pos += n;
	return 0;
}

static int
gguf_rd_str(struct gguf_rd *rd, struct gguf_str *ret, const char *what)
{
	uint64_t len;
	int rv;

	if ((rv = gguf_rd_uint(rd, 8, &len, what)) != 0)
		return rv;
	if (len > rd->g->size - rd->pos)
		return err_set(rd->err, SOTTO_EFORMAT, "%s: %s length %"
		    PRIu64 " at byte %zu runs past the end of the file "
		    "(%zu bytes)", rd->g->path, what, len, rd->pos - 8,
		    rd->g->size);
	ret->ptr = (const char *)rd->g->base + rd->pos;
	ret->len = len;
	rd->pos += len;
	return 0;
}

static int
gguf_rd_type(struct gguf_rd *rd, enum gguf_type *ret, const char *what)
{
	uint64_t t;
	int rv;

	if ((rv = gguf_rd_uint(rd, 4, &t, what)) != 0)
		return rv;
	if (t > GGUF_TYPE_FLOAT64)
		return err_set(rd->err, SOTTO_EFORMAT, "%s: key %.*s: unknown "
		    "value type %" PRIu64, rd->g->path, GGUF_PR(rd->ctx), t);
	*ret = (enum gguf_type)t;
	return 0;
}

/* Skip an array's elements, checking they fit; rejects arrays of arrays. */
static int
gguf_rd_array(struct gguf_rd *rd, struct gguf_kv *kv)
{
	const struct gguf *g = rd->g;
	struct gguf_str s;
	uint64_t i, esize;
	int rv;

	if ((rv = gguf_rd_type(rd, &kv->atype, "array type")) != 0 ||
	    (rv = gguf_rd_uint(rd, 8, &kv->n, "array length")) != 0)
		return rv;
	if (kv->atype == GGUF_TYPE_ARRAY)
		return err_set(rd->err, SOTTO_EFORMAT, "%s: key %.*s: nested "
		    "arrays are not supported", g->path, GGUF_PR(kv->key));
	kv->val = g->base + rd->pos;
	esize = kv->atype == GGUF_TYPE_STRING ? 8 : gguf_type_bytes[kv->atype];
	if (kv->n > (g->size - rd->pos) / esize)
		return err_set(rd->err, SOTTO_EFORMAT, "%s: key %.*s: array of "
		    "%" PRIu64 " %s runs past the end of the file (%zu bytes)",
		    g->path, GGUF_PR(kv->key), kv->n,
		    gguf_type_names[kv->atype], g->size);
	if (kv->atype != GGUF_TYPE_STRING) {
		rd->pos += kv->n * esize;
		return 0;
	}
	for (i = 0; i < kv->n; i++)
		if ((rv = gguf_rd_str(rd, &s, "array string")) != 0)
			return rv;
	return 0;
}

static int
gguf_rd_kv(struct gguf_rd *rd, struct gguf_kv *kv)
{
	struct gguf_str s;
	int rv;

	rd->ctx.len = 0;
	if ((rv = gguf_rd_str(rd, &kv->key, "key")) != 0)
		return rv;
	if (kv->key.len == 0 || kv->key.len > GGUF_KEY_MAX_BYTES)
		return err_set(rd->err, SOTTO_EFORMAT, "%s: key at byte %zu "
		    "has length %" PRIu64 " (need 1 to %d)", rd->g->path,
		    rd->pos - kv->key.len - 8, kv->key.len, GGUF_KEY_MAX_BYTES);
	rd->ctx = kv->key;
	if ((rv = gguf_rd_type(rd, &kv->type, "value type")) != 0)
		return rv;
	kv->n = 1;
	kv->val = rd->g->base + rd->pos;
	if (kv->type == GGUF_TYPE_ARRAY)
		return gguf_rd_array(rd, kv);
	if (kv->type == GGUF_TYPE_STRING)
		return gguf_rd_str(rd, &s, "string value");
	rd->what = "value";
	if ((rv = gguf_rd_need(rd, gguf_type_bytes[kv->type])) != 0)
		return rv;
	rd->pos += gguf_type_bytes[kv->type];
	return 0;
}

static int
gguf_rd_header(struct gguf_rd *rd, uint64_t *n_tensors, uint64_t *n_kv)
{
	const struct gguf *g = rd->g;
	uint64_t magic, version, left;
	int rv;

	if ((rv = gguf_rd_uint(rd, 4, &magic, "magic")) != 0)
		return rv;
	if (magic != GGUF_MAGIC)
		return err_set(rd->err, SOTTO_EFORMAT, "%s: not a GGUF file "
		    "(bad magic); convert the model with %s", g->path,
		    err_fetch_command());
	if ((rv = gguf_rd_uint(rd, 4, &version, "version")) != 0)
		return rv;
	if (version == 0x02000000 || version == 0x03000000)
		return err_set(rd->err, SOTTO_EFORMAT, "%s: big-endian GGUF "
		    "is not supported", g->path);
	if (version != 2 && version != 3)
		return err_set(rd->err, SOTTO_EFORMAT, "%s: GGUF version %"
		    PRIu64 " is not supported (need 2 or 3)", g->path, version);
	if ((rv = gguf_rd_uint(rd, 8, n_tensors, "tensor count")) != 0 ||
	    (rv = gguf_rd_uint(rd, 8, n_kv, "key/value count")) != 0)
		return rv;
	left = g->size - rd->pos;
	if (*n_kv > left / GGUF_KV_MIN_BYTES ||
	    *n_tensors > left / GGUF_TENSOR_MIN_BYTES ||
	    *n_kv * GGUF_KV_MIN_BYTES + *n_tensors * GGUF_TENSOR_MIN_BYTES >
	    left)
		return err_set(rd->err, SOTTO_EFORMAT, "%s: header claims %"
		    PRIu64 " tensors and %" PRIu64 " key/values, more than "
		    "fit in %zu bytes", g->path, *n_tensors, *n_kv, g->size);
	return 0;
}

static int
gguf_str_cmp(struct gguf_str a, struct gguf_str b)
{
	size_t n = a.len < b.len ? a.len : b.len;
	int c;

	if (n > 0 && (c = memcmp(a.ptr, b.ptr, n)) != 0)
		return c;
	return (a.len > b.len) - (a.len < b.len);
}

int
gguf_kv_cmp(const void *a, const void *b)
{
	return gguf_str_cmp(((const struct gguf_kv *)a)->key,
	    ((const struct gguf_kv *)b)->key);
}

int
gguf_tensor_name_cmp(const void *a, const void *b)
{
	return gguf_str_cmp((*(const struct gguf_tensor *const *)a)->name,
	    (*(const struct gguf_tensor *const *)b)->name);
}

static int
gguf_tensor_data_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)(*(const struct gguf_tensor *const *)a)->data;
	uintptr_t y = (uintptr_t)(*(const struct gguf_tensor *const *)b)->data;

	return (x > y) - (x < y);
}

static int
gguf_read_kvs(struct gguf_rd *rd, struct gguf *g, uint64_t n)
{
	size_t i;
	int rv;

	if ((g->kv = calloc(n > 0 ? n : 1, sizeof(*g->kv))) == NULL)
		return err_set(rd->err, SOTTO_ENOMEM, "%s: out of memory",
		    g->path);
	g->n_kv = n;
	for (i = 0; i < n; i++)
		if ((rv = gguf_rd_kv(rd, &g->kv[i])) != 0)
			return rv;
	qsort(g->kv, n, sizeof(*g->kv), gguf_kv_cmp);
	for (i = 1; i < n; i++)
		if (gguf_str_cmp(g->kv[i - 1].key, g->kv[i].key) == 0)
			return err_set(rd->err, SOTTO_EFORMAT, "%s: duplicate "
			    "key %.*s", g->path, GGUF_PR(g->kv[i].key));
	return 0;
}

static int
gguf_read_alignment(struct gguf *g, char *err)
{
	uint32_t a;
	int rv;

	g->alignment = GGUF_ALIGN_DEFAULT;
	if (!gguf_has_key(g, "general.alignment"))
		return 0;
	if ((rv = gguf_get_u32(g, "general.alignment", &a, err)) != 0)
		return rv;
	if (a == 0 || a > GGUF_ALIGN_MAX || (a & (a - 1)) != 0)
		return err_set(err, SOTTO_EFORMAT, "%s: general.alignment %"
		    PRIu32 " is not a power of two from 1 to %d", g->path, a,
		    GGUF_ALIGN_MAX);
	g->alignment = a;
	return 0;
}

/* Read one tensor info; dims are reversed into numpy order. */
static int
gguf_rd_tensor(struct gguf_rd *rd, struct gguf_tensor *t, uint64_t *offset)
{
	const char *path = rd->g->path;
	uint64_t nd, d, type;
	int i, rv;

	rd->ctx.len = 0;
	if ((rv = gguf_rd_str(rd, &t->name, "tensor name")) != 0)
		return rv;
	if (t->name.len == 0 || t->name.len > GGUF_NAME_MAX_BYTES)
		return err_set(rd->err, SOTTO_EFORMAT, "%s: tensor name of "
		    "length %" PRIu64 " (need 1 to %d)", path, t->name.len,
		    GGUF_NAME_MAX_BYTES);
	rd->ctx = t->name;
	if ((rv = gguf_rd_uint(rd, 4, &nd, "dimension count")) != 0)
		return rv;
	if (nd < 1 || nd > GGUF_DIMS_MAX)
		return err_set(rd->err, SOTTO_EFORMAT, "%s: tensor %.*s has %"
		    PRIu64 " dimensions (need 1 to %d)", path,
		    GGUF_PR(t->name), nd, GGUF_DIMS_MAX);
	t->n_dims = (int)nd;
	for (i = 0; i < t->n_dims; i++) {
		if ((rv = gguf_rd_uint(rd, 8, &d, "dimension")) != 0)
			return rv;
		if (d < 1 || d > INT64_MAX)
			return err_set(rd->err, SOTTO_EFORMAT,
			    "%s: tensor %.*s: dimension %d is %" PRIu64, path,
			    GGUF_PR(t->name), i, d);
		t->dims[t->n_dims - 1 - i] = (int64_t)d;
	}
	if ((rv = gguf_rd_uint(rd, 4, &type, "tensor type")) != 0)
		return rv;
	if (type != GGUF_DTYPE_F32 && type != GGUF_DTYPE_F16)
		return err_set(rd->err, SOTTO_EFORMAT, "%s: tensor %.*s has "
		    "ggml type %" PRIu64 "; sotto reads only F32 (0) and F16 "
		    "(1), re-convert the model with %s", path,
		    GGUF_PR(t->name), type, err_fetch_command());
	t->type = (enum gguf_dtype)type;
	return gguf_rd_uint(rd, 8, offset, "tensor offset");
}

/* Size of a tensor's data, or -1 if it does not fit in a size_t. */
static int
gguf_tensor_nbytes(const struct gguf_tensor *t, size_t *ret)
{
	uint64_t n = t->type == GGUF_DTYPE_F16 ? 2 : 4;
	int i;

	for (i = 0; i < t->n_dims; i++)
		if (__builtin_mul_overflow(n, (uint64_t)t->dims[i], &n))
			return -1;
	if (n > SIZE_MAX || n > INT64_MAX)
		return -1;
	*ret = (size_t)n;
	return 0;
}

/* Check a tensor's data lies in [start, size) and point it there. */
static int
gguf_bind_tensor(struct gguf *g, struct gguf_tensor *t, size_t start,
    uint64_t off, char *err)
{
	size_t nb, avail = g->size - start;

	if (off % g->alignment != 0)
		return err_set(err, SOTTO_EFORMAT, "%s: tensor %.*s: data "
		    "offset %" PRIu64 " is not a multiple of the alignment %zu",
		    g->path, GGUF_PR(t->name), off, g->alignment);
	if (gguf_tensor_nbytes(t, &nb) != 0)
		return err_set(err, SOTTO_EFORMAT, "%s: tensor %.*s: element "
		    "count overflows", g->path, GGUF_PR(t->name));
	if (off > avail || nb > avail - off)
		return err_set(err, SOTTO_EFORMAT, "%s: tensor %.*s: %zu bytes "
		    "at data offset %" PRIu64 " run past the end of the file "
		    "(%zu bytes of data); re-download or re-convert the model",
		    g->path, GGUF_PR(t->name), nb, off, avail);
	t->data = g->base + start + off;
	t->nbytes = nb;
	return 0;
}

/* Reject overlapping data and duplicate names; leaves by_name sorted. */
static int
gguf_index_tensors(struct gguf *g, char *err)
{
	const struct gguf_tensor *a, *b;
	size_t i;

	qsort(g->by_name, g->n_tensors, sizeof(*g->by_name),
	    gguf_tensor_data_cmp);
	for (i = 1; i < g->n_tensors; i++) {
		a = g->by_name[i - 1];
		b = g->by_name[i];
		if ((uintptr_t)a->data + a->nbytes > (uintptr_t)b->data)
			return err_set(err, SOTTO_EFORMAT,
			    "%s: tensors %.*s and %.*s overlap", g->path,
			    GGUF_PR(a->name), GGUF_PR(b->name));
	}
	qsort(g->by_name, g->n_tensors, sizeof(*g->by_name),
	    gguf_tensor_name_cmp);
	for (i = 1; i < g->n_tensors; i++)
		if (gguf_str_cmp(g->by_name[i - 1]->name,
		    g->by_name[i]->name) == 0)
			return err_set(err, SOTTO_EFORMAT,
			    "%s: duplicate tensor %.*s", g->path,
			    GGUF_PR(g->by_name[i]->name));
	return 0;
}

static int
gguf_read_tensors(struct gguf_rd *rd, struct gguf *g, uint64_t n)
{
	uint64_t *off;
	size_t i, start;
	int rv = 0;

	g->tensors = calloc(n > 0 ? n : 1, sizeof(*g->tensors));
	g->by_name = calloc(n > 0 ? n : 1, sizeof(*g->by_name));
	off = calloc(n > 0 ? n : 1, sizeof(*off));
	if (g->tensors == NULL || g->by_name == NULL || off == NULL) {
		free(off);
		return err_set(rd->err, SOTTO_ENOMEM, "%s: out of memory",
		    g->path);
	}
	g->n_tensors = n;
	for (i = 0; i < n && rv == 0; i++) {
		rv = gguf_rd_tensor(rd, &g->tensors[i], &off[i]);
		g->by_name[i] = &g->tensors[i];
	}
	start = rd->pos + (g->alignment - rd->pos % g->alignment) %
	    g->alignment;
	g->data_start = start;
	if (rv == 0 && n > 0 && start > g->size)
		rv = err_set(rd->err, SOTTO_EFORMAT, "%s: truncated: tensor "
		    "data would start at byte %zu (file is %zu bytes)",
		    g->path, start, g->size);
	for (i = 0; i < n && rv == 0; i++)
		rv = gguf_bind_tensor(g, &g->tensors[i], start, off[i],
		    rd->err);
	free(off);
	return rv != 0 ? rv : gguf_index_tensors(g, rd->err);
}

static int
gguf_parse(struct gguf *g, char *err)
{
	struct gguf_rd rd = { .g = g, .err = err };
	uint64_t n_tensors = 0, n_kv = 0;
	int rv;

	if (g->size == 0)
		return err_set(err, SOTTO_EFORMAT, "%s: empty file", g->path);
	if ((rv = gguf_rd_header(&rd, &n_tensors, &n_kv)) != 0 ||
	    (rv = gguf_read_kvs(&rd, g, n_kv)) != 0 ||
	    (rv = gguf_read_alignment(g, err)) != 0)
		return rv;
	return gguf_read_tensors(&rd, g, n_tensors);
}

/* Take ownership of base (unmapped on close when mapped) and parse. */
int
gguf_load(const char *path, const void *base, size_t size, int mapped,
    struct gguf **ret, char *err)
{
	struct gguf *g;
	int rv;

	if ((g = calloc(1, sizeof(*g))) == NULL ||
	    (g->path = strdup(path)) == NULL) {
		free(g);
		if (mapped)
			munmap((void *)base, size);
		return err_set(err, SOTTO_ENOMEM, "%s: out of memory", path);
	}
	g->base = base;
	g->size = size;
	g->mapped = mapped;
	if ((rv = gguf_parse(g, err)) != 0) {
		gguf_close(g);
		return rv;
	}
	*ret = g;
	return 0;
}

int
gguf_open_memory(const void *buf, size_t len, struct gguf **ret, char *err)
{
	*ret = NULL;
	if (buf == NULL && len > 0)
		return err_set(err, SOTTO_EINVAL, "<memory>: NULL buffer");
	return gguf_load("<memory>", buf, len, 0, ret, err);
}

void
gguf_close(struct gguf *g)
{
	if (g == NULL)
		return;
	gguf_unmap(g);
	free(g->kv);
	free(g->retained);
	free(g->tensors);
	free(g->by_name);
	free(g->path);
	free(g);
}

