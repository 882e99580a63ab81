/*
 * libFuzzer target for lib/model/gguf.c: parse the input as a GGUF image and,
 * when it is accepted, walk everything the index points at so that ASan
 * checks each view lies inside the input.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "sotto.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static const char *const fuzz_keys[] = {
	"general.alignment", "general.architecture", "general.name",
	"whisper.n_mels", "whisper.languages", "whisper.suppress_tokens",
	"whisper.tokenizer.tokens", "k",
};

/* Touch the first and last byte of a view. */
static unsigned
fuzz_touch(const void *p, size_t n)
{
	const volatile unsigned char *c = p;

	return n > 0 ? c[0] + c[n - 1] : 0;
}

static void
fuzz_keys_walk(const struct gguf *g)
{
	char err[SOTTO_ERR_MAX];
	struct gguf_str s, *sa;
	int32_t *ia;
	uint32_t u;
	size_t i, j, n;

	for (i = 0; i < sizeof(fuzz_keys) / sizeof(fuzz_keys[0]); i++) {
		(void)gguf_has_key(g, fuzz_keys[i]);
		(void)gguf_get_u32(g, fuzz_keys[i], &u, err);
		if (gguf_get_str(g, fuzz_keys[i], &s, err) == 0)
			fuzz_touch(s.ptr, s.len);
		if (gguf_get_i32_array(g, fuzz_keys[i], &ia, &n, err) == 0)
			free(ia);
		if (gguf_get_str_array(g, fuzz_keys[i], &sa, &n, err) == 0) {
			for (j = 0; j < n; j++)
				fuzz_touch(sa[j].ptr, sa[j].len);
			free(sa);
		}
	}
}

static void
fuzz_tensors_walk(const struct gguf *g)
{
	char err[SOTTO_ERR_MAX], name[80];
	const struct gguf_tensor *t;
	size_t i;

	for (i = 0; i < gguf_n_tensors(g); i++) {
		t = gguf_tensor_at(g, i);
		fuzz_touch(t->data, t->nbytes);
		fuzz_touch(t->name.ptr, t->name.len);
		if (t->name.len >= sizeof(name) ||
		    memchr(t->name.ptr, '\0', t->name.len) != NULL)
			continue;
		memcpy(name, t->name.ptr, t->name.len);
		name[t->name.len] = '\0';
		if (gguf_find_tensor(g, name) != t)
			abort();
		if (gguf_expect_tensor(g, name, t->type, t->n_dims, t->dims,
		    NULL, err) != 0)
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[SOTTO_ERR_MAX];
	struct gguf *g;

	err[0] = '\0';
	if (gguf_open_memory(data, size, &g, err) != 0) {
		if (strlen(err) == 0)
			abort();
		return 0;
	}
	fuzz_keys_walk(g);
	fuzz_tensors_walk(g);
	gguf_close(g);
	return 0;
}
