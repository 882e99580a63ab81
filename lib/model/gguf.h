/*
 * GGUF reader (gguf.c, gguf-get.c, gguf-load.c): a hardened,
 * read-only view of a GGUF v2/v3 file. See docs/model-format.md for the
 * keys and tensors sotto uses.
 *
 * Everything returned (strings, tensor data) points into the struct
 * gguf's copy of the file and lives as long as it does, except the data
 * of tensors that gguf_release() gave back. Strings are NOT
 * NUL-terminated.
 */
#ifndef SOTTO_GGUF_H
#define SOTTO_GGUF_H

#include <stddef.h>
#include <stdint.h>

/* Key/value types, numbered as in the file. */
enum gguf_type {
	GGUF_TYPE_UINT8 = 0,
	GGUF_TYPE_INT8,
	GGUF_TYPE_UINT16,
	GGUF_TYPE_INT16,
	GGUF_TYPE_UINT32,
	GGUF_TYPE_INT32,
	GGUF_TYPE_FLOAT32,
	GGUF_TYPE_BOOL,
	GGUF_TYPE_STRING,
	GGUF_TYPE_ARRAY,
	GGUF_TYPE_UINT64,
	GGUF_TYPE_INT64,
	GGUF_TYPE_FLOAT64,
};

/* The only tensor types sotto accepts (ggml type numbers). */
enum gguf_dtype {
	GGUF_DTYPE_F32 = 0,
	GGUF_DTYPE_F16 = 1,
};

/* A view into the file; not NUL-terminated. */
struct gguf_str {
	const char	*ptr;
	uint64_t	 len;
};

/*
 * dims[n_dims - 1] is the contiguous one (GGUF's ne[] reversed); data
 * points into the mapping.
 */
struct gguf_tensor {
	struct gguf_str	 name;
	enum gguf_dtype	 type;
	int		 n_dims;	/* 1..4 */
	int64_t		 dims[4];	/* numpy order, outermost first */
	const void	*data;		/* aligned to general.alignment */
	size_t		 nbytes;
};

/* Owns the mapping (or borrows a memory buffer) and the index. */
struct gguf;

/*
 * Read path into memory of our own and validate it; messages name the
 * file. What the struct gguf holds never depends on the file again.
 */
int	gguf_open(const char *path, struct gguf **ret, char *err);

/*
 * Validate a file image in memory; borrows buf, which must outlive the
 * struct gguf. Tensor data is aligned relative to buf only.
 */
int	gguf_open_memory(const void *buf, size_t len, struct gguf **ret,
	    char *err);
void	gguf_close(struct gguf *);

/*
 * After a load: gguf_retain() each tensor whose data is still read (data
 * points anywhere into it; 0, or SOTTO_ENOMEM, or SOTTO_EINVAL when no
 * tensor holds it), then gguf_release() gives back the memory of the
 * others (their data becomes NULL; gguf_expect_tensor() refuses them).
 * Both do nothing to a gguf_open_memory() buffer but keep it all.
 */
int	gguf_retain(struct gguf *, const void *data);
void	gguf_release(struct gguf *);

/*
 * During a load: the tensor whose data holds data is not read again
 * (converted); the pages wholly inside it are given back now, not at
 * gguf_release(), so that a load never holds the whole file and what it
 * was converted into at once. Reading it afterwards gives zeros. 0, or
 * SOTTO_EINVAL when no tensor holds data or it was retained (and a
 * later gguf_retain() of it is SOTTO_EINVAL too), or SOTTO_ENOMEM.
 */
int	gguf_drop(struct gguf *, const void *data);

/* The path given to gguf_open(), or "<memory>". */
const char *gguf_path(const struct gguf *);
/* "F32", "F16". */
const char *gguf_dtype_name(enum gguf_dtype);

/*
 * Key lookups. A missing key or a wrong type is SOTTO_EFORMAT with a
 * message naming the key and the type found.
 */
/* Any integer type whose value fits in a uint32_t. */
int	gguf_get_u32(const struct gguf *, const char *key, uint32_t *ret,
	    char *err);
int	gguf_get_str(const struct gguf *, const char *key,
	    struct gguf_str *ret, char *err);
/* A malloc'd copy the caller frees; any integer array whose values fit. */
int	gguf_get_i32_array(const struct gguf *, const char *key,
	    int32_t **ret, size_t *ret_n, char *err);
/* A malloc'd array of views into the file; the caller frees the array. */
int	gguf_get_str_array(const struct gguf *, const char *key,
	    struct gguf_str **ret, size_t *ret_n, char *err);
int	gguf_has_key(const struct gguf *, const char *key);

/* Tensors in file order, or by name (NULL when absent). */
size_t	gguf_n_tensors(const struct gguf *);
const struct gguf_tensor *gguf_tensor_at(const struct gguf *, size_t i);
const struct gguf_tensor *gguf_find_tensor(const struct gguf *,
	    const char *name);

/*
 * Find a tensor and check its type and shape (numpy order, n_dims
 * entries). ret may be NULL. The message names the file and the tensor:
 * "model.gguf: tensor enc.0.attn.q.w: expected F16 [384][384], found F32
 * [384][1536]".
 */
int	gguf_expect_tensor(const struct gguf *, const char *name,
	    enum gguf_dtype type, int n_dims, const int64_t *dims,
	    const struct gguf_tensor **ret, char *err);

/* gguf_expect_tensor() of an F32 tensor; *ret = its data. */
int	gguf_expect_f32(const struct gguf *, const char *name, int n_dims,
	    const int64_t *dims, const float **ret, char *err);

/*
 * What a small model's file must say of itself (the VAD's, the speaker
 * model's): its general.architecture and the values of its u32 keys that
 * the code is written for. The strings are static.
 */
struct gguf_kind {
	const char	*arch;		/* general.architecture */
	const char	*what;		/* "PATH is not a <what> model" */
	const char	*runs;		/* "sotto runs only the <runs> (N)" */
	const char	*fetch_name;	/* "run 'sotto-fetch-model <name>'" */
	const struct gguf_want_u32 {
		const char	*key;
		uint32_t	 want;
	}		*keys;
	size_t		 n_keys;
};

/*
 * 0 when g is a model of that kind; otherwise SOTTO_EFORMAT with a
 * message naming the file, what is wrong and the fetch command to run.
 */
int	gguf_check_kind(const struct gguf *, const struct gguf_kind *,
	    char *err);

#endif
