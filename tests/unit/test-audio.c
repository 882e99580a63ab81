/*
 * Unit tests for common/audio.c: WAV files written here with libsndfile
 * at several rates and channel counts, plus files that are not audio.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sndfile.h>

#include "audio.h"

#define TEST_ERR_MAX	256

static char test_dir[512];

/* Build the path of a file in the test directory. */
static const char *
test_path(const char *name)
{
	static char path[1024];

	snprintf(path, sizeof(path), "%s/%s", test_dir, name);
	return path;
}

/* Write frames x[frames][channels] as a 16-bit WAV. */
static const char *
test_write_wav(const char *name, int rate, int channels, const short *x,
    sf_count_t frames)
{
	const char *path = test_path(name);
	SF_INFO info;
	SNDFILE *sf;

	memset(&info, 0, sizeof(info));
	info.samplerate = rate;
	info.channels = channels;
	info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
	sf = sf_open(path, SFM_WRITE, &info);
	assert_non_null(sf);
	assert_int_equal(sf_writef_short(sf, x, frames), frames);
	assert_int_equal(sf_close(sf), 0);
	return path;
}

/* A sine of f Hz at rate, amplitude a, as 16-bit samples. */
static short *
test_sine(int rate, double f, double a, size_t n)
{
	short *x;
	size_t i;

	x = malloc((n > 0 ? n : 1) * sizeof(*x));
	assert_non_null(x);
	for (i = 0; i < n; i++)
		x[i] = (short)lrint(32767.0 * a *
		    sin(2.0 * M_PI * f * (double)i / rate));
	return x;
}

static void
test_read_ok(const char *path, float **ret, size_t *ret_n)
{
	char err[TEST_ERR_MAX] = "";

	if (audio_read_file(path, ret, ret_n, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_non_null(*ret);
}

/* 16 kHz mono passes through unchanged: s16 / 32768 exactly. */
static void
test_16k_passthrough(void **state)
{
	const size_t n = 16000 + 123;
	short *x = malloc(n * sizeof(*x));
	float *pcm;
	size_t i, got;

	(void)state;
	assert_non_null(x);
	for (i = 0; i < n; i++)
		x[i] = (short)((i * 7919) % 65536 - 32768);
	test_read_ok(test_write_wav("16k.wav", 16000, 1, x, (sf_count_t)n),
	    &pcm, &got);
	assert_int_equal(got, n);
	for (i = 0; i < n; i++)
		assert_true(pcm[i] == (float)x[i] / 32768.0f);
	free(pcm);
	free(x);
}

/*
 * Amplitude and frequency check: project pcm[skip..n-skip) on sin and
 * cos at f Hz and require the remainder to be tiny.
 */
static void
test_check_sine(const float *pcm, size_t n, double f, double a)
{
	const size_t skip = 400;
	double s = 0, c = 0, amp, res = 0, e, ph;
	size_t i, m = n - 2 * skip, crossings = 0;

	for (i = skip; i < n - skip; i++) {
		ph = 2.0 * M_PI * f * (double)i / AUDIO_RATE;
		s += pcm[i] * sin(ph);
		c += pcm[i] * cos(ph);
		if (i > skip && (pcm[i - 1] < 0) != (pcm[i] < 0))
			crossings++;
	}
	s *= 2.0 / (double)m;
	c *= 2.0 / (double)m;
	amp = sqrt(s * s + c * c);
	for (i = skip; i < n - skip; i++) {
		ph = 2.0 * M_PI * f * (double)i / AUDIO_RATE;
		e = pcm[i] - (s * sin(ph) + c * cos(ph));
		res += e * e;
	}
	res = sqrt(res / (double)m);
	assert_float_equal(amp, a, 0.01 * a);
	assert_true(res < 0.01 * a);
	/* two zero crossings per period */
	assert_true(fabs((double)crossings - 2.0 * f * m / AUDIO_RATE) <= 2);
}

/* A 1 kHz sine at 48 kHz is still a 1 kHz sine at 16 kHz. */
static void
test_48k_sine(void **state)
{
	const size_t n = 48000;
	short *x = test_sine(48000, 1000.0, 0.5, n);
	float *pcm;
	size_t got;

	(void)state;
	test_read_ok(test_write_wav("48k.wav", 48000, 1, x, (sf_count_t)n),
	    &pcm, &got);
	assert_true(got >= 15999 && got <= 16001);
	test_check_sine(pcm, got, 1000.0, 0.5);
	free(pcm);
	free(x);
}

/* 8 kHz stereo: channels are averaged, then upsampled. */
static void
test_8k_stereo(void **state)
{
	const size_t n = 8000;
	short *mono = test_sine(8000, 300.0, 0.6, n);
	short *x = malloc(2 * n * sizeof(*x));
	float *pcm;
	size_t i, got;

	(void)state;
	assert_non_null(x);
	for (i = 0; i < n; i++) {		/* same on both sides */
		x[2 * i] = mono[i];
		x[2 * i + 1] = mono[i];
	}
	test_read_ok(test_write_wav("8k-same.wav", 8000, 2, x,
	    (sf_count_t)n), &pcm, &got);
	assert_true(got >= 15999 && got <= 16001);
	test_check_sine(pcm, got, 300.0, 0.6);
	free(pcm);
	for (i = 0; i < n; i++)			/* opposite: cancels */
		x[2 * i + 1] = (short)-mono[i];
	test_read_ok(test_write_wav("8k-opposite.wav", 8000, 2, x,
	    (sf_count_t)n), &pcm, &got);
	assert_true(got >= 15999 && got <= 16001);
	for (i = 0; i < got; i++)
		assert_true(fabsf(pcm[i]) < 1e-6f);
	free(pcm);
	free(x);
	free(mono);
}

/* A WAV with no frames is empty audio, not an error, at any rate. */
static void
test_empty_wav(void **state)
{
	static const int rates[] = { 16000, 48000 };
	short none = 0;
	float *pcm;
	size_t i, got = 99;

	(void)state;
	for (i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
		test_read_ok(test_write_wav("empty.wav", rates[i], 1, &none,
		    0), &pcm, &got);
		assert_int_equal(got, 0);
		free(pcm);
	}
}

/* Expect failure with a message that names the file and says what. */
static void
test_read_fails(const char *path, const char *what)
{
	char err[TEST_ERR_MAX] = "";
	float *pcm = (float *)1;
	size_t n = 99;

	assert_int_equal(audio_read_file(path, &pcm, &n, err, sizeof(err)),
	    -1);
	assert_null(pcm);
	assert_int_equal(n, 0);
	if (strstr(err, path) == NULL || strstr(err, what) == NULL)
		fail_msg("message \"%s\" lacks \"%s\" or \"%s\"", err, path,
		    what);
	/* no buffer for the message is fine too */
	assert_int_equal(audio_read_file(path, &pcm, &n, NULL, 0), -1);
}

static void
test_not_audio(void **state)
{
	const char *path;
	unsigned char junk[4096];
	uint32_t seed = 12345;
	size_t i;
	FILE *f;

	(void)state;
	path = test_path("zero-bytes.wav");
	f = fopen(path, "wb");
	assert_non_null(f);
	fclose(f);
	test_read_fails(path, "not an audio file");

	for (i = 0; i < sizeof(junk); i++) {
		seed = seed * 1664525u + 1013904223u;
		junk[i] = (unsigned char)(seed >> 24);
	}
	path = test_path("random.wav");
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(junk, 1, sizeof(junk), f), sizeof(junk));
	fclose(f);
	test_read_fails(path, "not an audio file");
	{
		struct audio_file *af = (struct audio_file *)1;
		char err[TEST_ERR_MAX];

		assert_int_equal(audio_mem_open(junk, sizeof(junk), "junk",
		    &af, err, sizeof(err)), -1);
		assert_null(af);
		assert_non_null(strstr(err, "junk: not an audio file"));
		assert_int_equal(audio_mem_open(junk, 0, "none", &af, err,
		    sizeof(err)), -1);
		assert_non_null(strstr(err, "none: empty file"));
	}

	test_read_fails(test_path("does-not-exist.wav"), "No such file");
	test_read_fails(test_dir, "directory");
}

/* Write frames x[frames][channels] in format (FLAC, Ogg Vorbis ...). */
static const char *
test_write_format(const char *name, int format, int rate, int channels,
    const short *x, sf_count_t frames)
{
	const char *path = test_path(name);
	SF_INFO info;
	SNDFILE *sf;

	memset(&info, 0, sizeof(info));
	info.samplerate = rate;
	info.channels = channels;
	info.format = format;
	sf = sf_open(path, SFM_WRITE, &info);
	if (sf == NULL)
		fail_msg("%s: %s", name, sf_strerror(NULL));
	assert_int_equal(sf_writef_short(sf, x, frames), frames);
	assert_int_equal(sf_close(sf), 0);
	return path;
}

/* Read all of f in pieces of the sizes in step[] (cycled). */
static float *
test_read_pieces(struct audio_file *f, const size_t *step, size_t n_step,
    size_t *ret_n)
{
	char err[TEST_ERR_MAX] = "";
	size_t n = 0, cap = 1 << 16, i = 0;
	float *x = malloc(cap * sizeof(*x));
	long got;

	assert_non_null(x);
	do {
		if (cap - n < step[i % n_step]) {
			cap *= 2;
			x = realloc(x, cap * sizeof(*x));
			assert_non_null(x);
		}
		got = audio_file_read(f, x + n, step[i++ % n_step], err,
		    sizeof(err));
		if (got < 0)
			fail_msg("%s", err);
		assert_true((size_t)got <= step[(i - 1) % n_step]);
		n += (size_t)got;
	} while (got > 0);
	*ret_n = n;
	return x;
}

/* The bytes of path, malloc'd. */
static void *
test_slurp(const char *path, size_t *ret_len)
{
	FILE *fp = fopen(path, "rb");
	void *p;
	long n;

	assert_non_null(fp);
	assert_int_equal(fseek(fp, 0, SEEK_END), 0);
	n = ftell(fp);
	rewind(fp);
	assert_non_null(p = malloc((size_t)n));
	assert_int_equal(fread(p, 1, (size_t)n, fp), (size_t)n);
	fclose(fp);
	*ret_len = (size_t)n;
	return p;
}

/* audio_mem_open() of path's bytes gives want[n] in both passes. */
static void
test_mem_same(const char *path, const float *want, size_t n)
{
	static const size_t a[] = { 3, 70000 };
	char err[TEST_ERR_MAX] = "";
	struct audio_file *f;
	size_t len, nx, pass;
	void *bytes = test_slurp(path, &len);
	float *x;

	if (audio_mem_open(bytes, len, "upload", &f, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	for (pass = 0; pass < 2; pass++) {
		if (pass == 1 && audio_file_rewind(f, err, sizeof(err)) != 0)
			fail_msg("%s", err);
		x = test_read_pieces(f, a, 2, &nx);
		assert_int_equal(nx, n);
		assert_memory_equal(x, want, n * sizeof(*x));
		free(x);
	}
	assert_null(audio_file_problem(f));
	audio_file_close(f);
	free(bytes);
}

/*
 * The second pass (after a rewind) gives exactly the first pass's
 * samples, read in other pieces, and audio_read_file()'s, and so does
 * the file read from memory.
 */
static void
test_two_passes(const char *path)
{
	static const size_t a[] = { 1, 4096, 7, 100000, 333 };
	static const size_t b[] = { 480400, 5 };
	char err[TEST_ERR_MAX] = "";
	struct audio_file *f;
	float *x, *y, *z;
	size_t nx, ny, nz;

	if (audio_file_open(path, &f, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	x = test_read_pieces(f, a, 5, &nx);
	if (audio_file_rewind(f, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	y = test_read_pieces(f, b, 2, &ny);
	assert_null(audio_file_problem(f));
	audio_file_close(f);
	test_read_ok(path, &z, &nz);
	assert_int_equal(nx, ny);
	assert_int_equal(nx, nz);
	assert_memory_equal(x, y, nx * sizeof(*x));
	assert_memory_equal(x, z, nx * sizeof(*x));
	test_mem_same(path, x, nx);
	free(x);
	free(y);
	free(z);
}

/* 3 s of a sine, at 16 kHz (copied) and 44.1 kHz stereo (resampled). */
static void
test_rewind_same_samples(void **state)
{
	short *x = test_sine(44100, 440.0, 0.5, 3 * 44100);
	short *st = malloc(2 * 3 * 44100 * sizeof(*st));
	size_t i;

	(void)state;
	assert_non_null(st);
	for (i = 0; i < 3 * 44100; i++) {
		st[2 * i] = x[i];
		st[2 * i + 1] = (short)(x[i] / 2);
	}
	test_two_passes(test_write_wav("16k.wav", 16000, 1, x, 3 * 16000));
	test_two_passes(test_write_wav("48k.wav", 44100, 2, st, 3 * 44100));
	test_two_passes(test_write_format("rw.flac", SF_FORMAT_FLAC |
	    SF_FORMAT_PCM_16, 44100, 2, st, 3 * 44100));
	test_two_passes(test_write_format("rw.ogg", SF_FORMAT_OGG |
	    SF_FORMAT_VORBIS, 44100, 2, st, 3 * 44100));
	free(st);
	free(x);
}

/* Cut path to half its size; returns it. */
static const char *
test_truncate_half(const char *path)
{
	struct stat sb;

	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(truncate(path, sb.st_size / 2), 0);
	return path;
}

/*
 * A file cut short: the reader gives what could be read and says why it
 * ended; audio_read_file() fails with that message.
 */
static void
test_cut_short(const char *path, const char *what, size_t full)
{
	static const size_t step[] = { 4096 };
	char err[TEST_ERR_MAX] = "";
	struct audio_file *f;
	float *x = (float *)1;
	size_t n;

	if (audio_file_open(path, &f, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	free(test_read_pieces(f, step, 1, &n));
	if (audio_file_problem(f) == NULL ||
	    strstr(audio_file_problem(f), what) == NULL)
		fail_msg("%s: problem \"%s\", want \"%s\"", path,
		    audio_file_problem(f) ? audio_file_problem(f) : "(none)",
		    what);
	if (!(n > full / 4 && n < full * 3 / 4))
		fail_msg("%s: %zu of %zu samples read", path, n, full);
	audio_file_close(f);
	assert_int_equal(audio_read_file(path, &x, &n, err, sizeof(err)), -1);
	assert_null(x);
	assert_non_null(strstr(err, what));
}

static void
test_truncated(void **state)
{
	short *x = test_sine(16000, 440.0, 0.25, 10 * 16000);
	uint32_t seed = 99;
	size_t i;

	(void)state;
	/* noise, so that the audio and not the headers fills the file */
	for (i = 0; i < 10 * 16000; i++) {
		seed = seed * 1664525u + 1013904223u;
		x[i] = (short)(x[i] + (short)(seed >> 20) - 2048);
	}
	test_cut_short(test_truncate_half(test_write_format("cut.flac",
	    SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 16000, 1, x, 10 * 16000)),
	    "read error after", 10 * 16000);
	test_cut_short(test_truncate_half(test_write_format("cut.ogg",
	    SF_FORMAT_OGG | SF_FORMAT_VORBIS, 16000, 1, x, 10 * 16000)),
	    "Ogg stream ends after", 10 * 16000);
	test_cut_short(test_truncate_half(test_write_format("cut.opus",
	    SF_FORMAT_OGG | SF_FORMAT_OPUS, 16000, 1, x, 10 * 16000)),
	    "Ogg stream ends after", 10 * 16000);
	free(x);
}

/*
 * A pipe cannot be read twice: the first pass is kept and replayed. A
 * child writes the WAV into the pipe; the reader opens /dev/fd/N.
 */
static void
test_pipe(void **state)
{
	static const size_t step[] = { 1000 };
	short *x = test_sine(22050, 300.0, 0.5, 2 * 22050);
	const char *wav = test_write_wav("48k.wav", 22050, 1, x, 2 * 22050);
	char err[TEST_ERR_MAX] = "", dev[64], buf[4096];
	struct audio_file *f;
	float *a, *b, *c;
	size_t na, nb, nc;
	int fds[2], status;
	ssize_t k;
	FILE *in;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	if ((pid = fork()) == 0) {
		close(fds[0]);
		if ((in = fopen(wav, "rb")) == NULL)
			_exit(1);
		while ((k = (ssize_t)fread(buf, 1, sizeof(buf), in)) > 0)
			if (write(fds[1], buf, (size_t)k) != k)
				_exit(1);
		_exit(0);
	}
	assert_true(pid > 0);
	close(fds[1]);
	snprintf(dev, sizeof(dev), "/dev/fd/%d", fds[0]);
	if (audio_file_open(dev, &f, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	a = test_read_pieces(f, step, 1, &na);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (audio_file_rewind(f, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	b = test_read_pieces(f, step, 1, &nb);
	audio_file_close(f);
	close(fds[0]);
	test_read_ok(wav, &c, &nc);
	assert_int_equal(na, nc);
	assert_int_equal(nb, nc);
	assert_memory_equal(a, c, na * sizeof(*a));
	assert_memory_equal(b, c, na * sizeof(*a));
	free(a);
	free(b);
	free(c);
	free(x);
}

static int
test_setup(void **state)
{
	const char *tmp = getenv("TMPDIR");

	(void)state;
	snprintf(test_dir, sizeof(test_dir), "%s/test-audio.XXXXXX",
	    tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
	return mkdtemp(test_dir) == NULL ? -1 : 0;
}

static int
test_teardown(void **state)
{
	static const char *names[] = { "16k.wav", "48k.wav", "8k-same.wav",
	    "8k-opposite.wav", "empty.wav", "zero-bytes.wav", "random.wav",
	    "rw.flac", "rw.ogg", "cut.flac", "cut.ogg", "cut.opus" };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unlink(test_path(names[i]));
	return rmdir(test_dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_16k_passthrough),
		cmocka_unit_test(test_48k_sine),
		cmocka_unit_test(test_8k_stereo),
		cmocka_unit_test(test_empty_wav),
		cmocka_unit_test(test_not_audio),
		cmocka_unit_test(test_rewind_same_samples),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_pipe),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
