/*
 * Typed lookups in a parsed GGUF: key/values by key (bsearch over the
 * sorted index), tensors by name, the shape check the models use and
 * the check of a small model's architecture and parameters.
 * Values are decoded from the mapping with memcpy.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "gguf-private.h"

static const struct gguf_kv *
gguf_find_kv(const struct gguf *g, const char *key)
{
	struct gguf_kv k = { .key = { key, strlen(key) } };

	if (g->n_kv == 0)
		return NULL;
	return bsearch(&k, g->kv, g->n_kv, sizeof(*g->kv), gguf_kv_cmp);
}

int
gguf_has_key(const struct gguf *g, const char *key)
{
	return gguf_find_kv(g, key) != NULL;
}

/* "string", "u32", "array of u8" for messages. */
static const char *
gguf_kv_type_name(const struct gguf_kv *kv, char *buf, size_t size)
{
	if (kv->type != GGUF_TYPE_ARRAY)
		return gguf_type_names[kv->type];
	snprintf(buf, size, "array of %s", gguf_type_names[kv->atype]);
	return buf;
}

/* Find key; ok() checks its type, or its element type when array. */
static int
gguf_lookup(const struct gguf *g, const char *key, int array,
    int (*ok)(enum gguf_type), const char *want,
    const struct gguf_kv **ret, char *err)
{
	const struct gguf_kv *kv;
	char buf[32];

	if ((kv = gguf_find_kv(g, key)) == NULL)
		return err_set(err, SOTTO_EFORMAT, "%s: key %s is missing; "
		    "re-convert the model with %s", g->path, key,
		    err_fetch_command());
	if (array ? kv->type != GGUF_TYPE_ARRAY || !ok(kv->atype) :
	    !ok(kv->type))
		return err_set(err, SOTTO_EFORMAT, "%s: key %s: expected %s, "
		    "found %s", g->path, key, want,
		    gguf_kv_type_name(kv, buf, sizeof(buf)));
	*ret = kv;
	return 0;
}

static int
gguf_is_int(enum gguf_type t)
{
	return t <= GGUF_TYPE_INT32 || t == GGUF_TYPE_UINT64 ||
	    t == GGUF_TYPE_INT64;
}

static int
gguf_is_str(enum gguf_type t)
{
	return t == GGUF_TYPE_STRING;
}

/* An integer of type t at p; u64 values past INT64_MAX clamp to it. */
static int64_t
gguf_int_at(const unsigned char *p, enum gguf_type t)
{
	uint64_t v = gguf_le(p, gguf_type_bytes[t]);

	switch (t) {
	case GGUF_TYPE_INT8:
		return (int8_t)v;
	case GGUF_TYPE_INT16:
		return (int16_t)v;
	case GGUF_TYPE_INT32:
		return (int32_t)v;
	case GGUF_TYPE_INT64:
		return (int64_t)v;
	default:
		return v > INT64_MAX ? INT64_MAX : (int64_t)v;
	}
}

int
gguf_get_u32(const struct gguf *g, const char *key, uint32_t *ret, char *err)
{
	const struct gguf_kv *kv = NULL;
	int64_t v;
	int rv;

	if ((rv = gguf_lookup(g, key, 0, gguf_is_int, "an integer", &kv,
	    err)) != 0)
		return rv;
	v = gguf_int_at(kv->val, kv->type);
	if (v < 0 || v > UINT32_MAX)
		return err_set(err, SOTTO_EFORMAT, "%s: key %s: value %" PRId64
		    " does not fit in u32", g->path, key, v);
	*ret = (uint32_t)v;
	return 0;
}

int
gguf_get_str(const struct gguf *g, const char *key, struct gguf_str *ret,
    char *err)
{
	const struct gguf_kv *kv = NULL;
	int rv;

	if ((rv = gguf_lookup(g, key, 0, gguf_is_str, "a string",
	    &kv, err)) != 0)
		return rv;
	ret->len = gguf_le(kv->val, 8);
	ret->ptr = (const char *)kv->val + 8;
	return 0;
}

/* An array of n elements (never NULL on success, even for n = 0). */
static void *
gguf_array_alloc(const struct gguf *g, const char *key, uint64_t n,
    size_t size, char *err)
{
	void *a = NULL;

	if (n <= SIZE_MAX / size)
		a = malloc(n > 0 ? n * size : 1);
	if (a == NULL)
		err_set(err, SOTTO_ENOMEM, "%s: key %s: out of memory",
		    g->path, key);
	return a;
}

int
gguf_get_i32_array(const struct gguf *g, const char *key, int32_t **ret,
    size_t *ret_n, char *err)
{
	const struct gguf_kv *kv = NULL;
	size_t i, esize;
	int32_t *a;
	int64_t v;
	int rv;

	if ((rv = gguf_lookup(g, key, 1, gguf_is_int,
	    "an integer array", &kv, err)) != 0)
		return rv;
	if ((a = gguf_array_alloc(g, key, kv->n, sizeof(*a), err)) == NULL)
		return SOTTO_ENOMEM;
	esize = gguf_type_bytes[kv->atype];
	for (i = 0; i < kv->n; i++) {
		v = gguf_int_at(kv->val + i * esize, kv->atype);
		if (v < INT32_MIN || v > INT32_MAX) {
			free(a);
			return err_set(err, SOTTO_EFORMAT,
			    "%s: key %s: element %zu (%" PRId64 ") does not "
			    "fit in i32", g->path,
			    key, i, v);
		}
		a[i] = (int32_t)v;
	}
	*ret = a;
	*ret_n = kv->n;
	return 0;
}

int
gguf_get_str_array(const struct gguf *g, const char *key,
    struct gguf_str **ret, size_t *ret_n, char *err)
{
	const struct gguf_kv *kv = NULL;
	const unsigned char *p;
	struct gguf_str *a;
	size_t i;
	int rv;

	if ((rv = gguf_lookup(g, key, 1, gguf_is_str,
	    "a string array", &kv, err)) != 0)
		return rv;
	if ((a = gguf_array_alloc(g, key, kv->n, sizeof(*a), err)) == NULL)
		return SOTTO_ENOMEM;
	/* Checked while parsing: each string fits in the file. */
	for (p = kv->val, i = 0; i < kv->n; i++) {
		a[i].len = gguf_le(p, 8);
		a[i].ptr = (const char *)p + 8;
		p += 8 + a[i].len;
	}
	*ret = a;
	*ret_n = kv->n;
	return 0;
}

size_t
gguf_n_tensors(const struct gguf *g)
{
	return g->n_tensors;
}

const struct gguf_tensor *
gguf_tensor_at(const struct gguf *g, size_t i)
{
	return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const struct gguf_tensor *
gguf_find_tensor(const struct gguf *g, const char *name)
{
	struct gguf_tensor k = { .name = { name, strlen(name) } };
	const struct gguf_tensor *kp = &k, *const *t;

	if (g->n_tensors == 0)
		return NULL;
	t = bsearch(&kp, g->by_name, g->n_tensors, sizeof(*g->by_name),
	    gguf_tensor_name_cmp);
	return t != NULL ? *t : NULL;
}

/* "F16 [384][1536]" */
static void
gguf_shape_fmt(char *buf, size_t size, enum gguf_dtype type, int n_dims,
    const int64_t *dims)
{
	size_t len;
	int i;

	len = (size_t)snprintf(buf, size, "%s ", gguf_dtype_name(type));
	for (i = 0; i < n_dims && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "[%" PRId64 "]",
		    dims[i]);
}

int
gguf_expect_tensor(const struct gguf *g, const char *name,
    enum gguf_dtype type, int n_dims, const int64_t *dims,
    const struct gguf_tensor **ret, char *err)
{
	const struct gguf_tensor *t;
	char want[96], have[96];
	int i, ok;

	gguf_shape_fmt(want, sizeof(want), type, n_dims, dims);
	if ((t = gguf_find_tensor(g, name)) == NULL)
		return err_set(err, SOTTO_EFORMAT, "%s: tensor %s: missing "
		    "(expected %s)", g->path, name, want);
	ok = t->type == type && t->n_dims == n_dims;
	for (i = 0; ok && i < n_dims; i++)
		ok = t->dims[i] == dims[i];
	if (!ok) {
		gguf_shape_fmt(have, sizeof(have), t->type, t->n_dims,
		    t->dims);
		return err_set(err, SOTTO_EFORMAT, "%s: tensor %s: expected %s,"
		    " found %s", g->path, name, want, have);
	}
	if (t->data == NULL)
		return err_set(err, SOTTO_EINVAL, "%s: tensor %s: its memory "
		    "was given back after the model was loaded", g->path, name);
	if (ret != NULL)
		*ret = t;
	return 0;
}

int
gguf_expect_f32(const struct gguf *g, const char *name, int n_dims,
    const int64_t *dims, const float **ret, char *err)
{
	const struct gguf_tensor *t;
	int rc;

	if ((rc = gguf_expect_tensor(g, name, GGUF_DTYPE_F32, n_dims, dims,
	    &t, err)) != 0)
		return rc;
	*ret = t->data;
	return 0;
}

int
gguf_check_kind(const struct gguf *g, const struct gguf_kind *k, char *err)
{
	struct gguf_str arch;
	uint32_t v;
	size_t i;
	int rc;

	if ((rc = gguf_get_str(g, "general.architecture", &arch, err)) != 0)
		return rc;
	if (arch.len != strlen(k->arch) ||
	    memcmp(arch.ptr, k->arch, arch.len) != 0)
		return err_set(err, SOTTO_EFORMAT, "%s is not a %s model "
		    "(architecture \"%.*s\"); run '%s %s'", g->path, k->what,
		    (int)(arch.len < 64 ? arch.len : 64), arch.ptr,
		    err_fetch_command(), k->fetch_name);
	for (i = 0; i < k->n_keys; i++) {
		if ((rc = gguf_get_u32(g, k->keys[i].key, &v, err)) != 0)
			return rc;
		if (v != k->keys[i].want)
			return err_set(err, SOTTO_EFORMAT, "%s: %s is %u; sotto "
			    "runs only the %s (%u); run '%s %s'", g->path,
			    k->keys[i].key, v, k->runs, k->keys[i].want,
			    err_fetch_command(), k->fetch_name);
	}
	return 0;
}
