/*
 * GGUF reader internals shared by gguf.c (parsing and validation) and
 * gguf-get.c (typed lookups). Nothing outside those two files uses this.
 */
#ifndef SOTTO_GGUF_PRIVATE_H
#define SOTTO_GGUF_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

#define GGUF_MAGIC		0x46554747u	/* "GGUF" read little-endian */
#define GGUF_KV_MIN_BYTES	13	/* key length, type, 1-byte value */
#define GGUF_TENSOR_MIN_BYTES	32	/* name length, n_dims, ne, type, off */
#define GGUF_ALIGN_DEFAULT	32
#define GGUF_ALIGN_MAX		4096
#define GGUF_KEY_MAX_BYTES	65535
#define GGUF_NAME_MAX_BYTES	64
#define GGUF_DIMS_MAX		4

/* At most 64 bytes of a name from the file go into a message. */
#define GGUF_PR(s)	(int)((s).len < 64 ? (s).len : 64), \
	((s).ptr != NULL ? (s).ptr : "")

/* What the loader said of a tensor (struct gguf's retained[]). */
#define GGUF_RETAINED	1
#define GGUF_DROPPED	2

/* A byte range of a GGUF's memory: [start, end). */
struct gguf_span {
	size_t	start, end;
};

struct gguf_kv {
	struct gguf_str	 key;
	enum gguf_type	 type;
	enum gguf_type	 atype;		/* element type of an array */
	uint64_t	 n;		/* element count of an array */
	const unsigned char *val;	/* the value, or an array's elements */
};

struct gguf {
	char		*path;		/* for messages, owned */
	const unsigned char *base;	/* the mapping, or a borrowed buffer */
	size_t		 size;
	int		 mapped;	/* base is ours: unmapped on close */
	size_t		 data_start;	/* tensor data starts here */
	unsigned char	*retained;	/* [n_tensors]: GGUF_RETAINED, _DROPPED */
	int		 released;	/* gguf_release() done */
	struct gguf_span *kept;		/* then: the pages still mapped */
	size_t		 n_kept;
	size_t		 alignment;
	struct gguf_kv	*kv;		/* sorted by key, owned */
	size_t		 n_kv;
	struct gguf_tensor *tensors;	/* file order, owned */
	const struct gguf_tensor **by_name; /* sorted by name, owned */
	size_t		 n_tensors;
};

extern const uint8_t gguf_type_bytes[];
extern const char *const gguf_type_names[];

/* gguf.c */
uint64_t	gguf_le(const unsigned char *p, size_t n);
/* gguf-load.c: give back the memory of a mapped gguf (on close). */
void	gguf_unmap(struct gguf *);

/* Parse base[size] (taking it over when mapped) into *ret. */
int	gguf_load(const char *path, const void *base, size_t size,
	    int mapped, struct gguf **ret, char *err);
int	gguf_kv_cmp(const void *a, const void *b);
int	gguf_tensor_name_cmp(const void *a, const void *b);

#endif
