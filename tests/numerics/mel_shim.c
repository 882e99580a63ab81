/*
 * ctypes shim over lib/model/mel.c for tests/numerics/test_mel.py: one call
 * with the filter bank as an argument, so the test needs no model file.
 */
#include <stddef.h>

#include "mel.h"
#include "sotto.h"

int	shim_log_mel(const float *filters, int n_mels, const float *pcm,
	    size_t n, size_t pad, size_t first, size_t n_frames, float *out,
	    size_t ld, float *ret_max, char *err);
void	shim_normalize(float *mel, size_t rows, size_t cols, size_t ld,
	    float max_value);

/* Raw log10 mel of frames [first, first + n_frames); see mel_log(). */
int
shim_log_mel(const float *filters, int n_mels, const float *pcm, size_t n,
    size_t pad, size_t first, size_t n_frames, float *out, size_t ld,
    float *ret_max, char *err)
{
	struct mel *m;
	int rc;

	if ((rc = mel_new(n_mels, filters, &m, err)) != 0)
		return rc;
	rc = mel_log(m, pcm, n, pad, first, n_frames, out, ld, ret_max, err);
	mel_free(m);
	return rc;
}

void
shim_normalize(float *mel, size_t rows, size_t cols, size_t ld,
    float max_value)
{
	mel_normalize(mel, rows, cols, ld, max_value);
}
