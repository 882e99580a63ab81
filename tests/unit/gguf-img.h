/*
 * A tiny GGUF writer for the unit tests of lib/model/gguf.c (test-gguf.c,
 * test-gguf-file.c): images built in memory, good ones and parts of
 * broken ones.
 */
#ifndef SOTTO_TEST_GGUF_IMG_H
#define SOTTO_TEST_GGUF_IMG_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

/* A growing byte buffer: the GGUF writer. */
struct img {
	unsigned char	*p;
	size_t		 len, cap;
};

void	img_put(struct img *b, const void *p, size_t n);
void	img_int(struct img *b, uint64_t v, size_t n);
void	img_str(struct img *b, const char *s);
void	img_header(struct img *b, uint32_t version, uint64_t n_tensors,
	    uint64_t n_kv);
void	img_kv(struct img *b, const char *key, enum gguf_type t, uint64_t v);
void	img_kv_str(struct img *b, const char *key, const char *s);
void	img_kv_arr(struct img *b, const char *key, enum gguf_type t,
	    uint64_t n);
void	img_tensor(struct img *b, const char *name, uint32_t n_dims,
	    const uint64_t *ne, uint32_t type, uint64_t offset);
void	img_pad(struct img *b, size_t align);
void	img_fill(struct img *b, size_t n);
void	img_good(struct img *b, uint32_t version, uint32_t align);
int	img_open(const struct img *b, size_t len, struct gguf **g, char *err);
void	img_expect_fail(struct img *b, const char *want);
void	img_one_tensor(struct img *b, uint32_t n_dims,
	    const uint64_t *ne, uint32_t type, uint64_t offset, size_t data);

#endif
