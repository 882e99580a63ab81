/*
 * Unit tests for daemon/sources/source-alsa.c without a sound card: ALSA's file
 * plugin with an infile and a null slave is a capture PCM that yields the
 * bytes of a raw file.  The test writes real speech (jfk.wav from the
 * shared audio directory) as raw s16le, defines the PCMs in its own
 * asoundrc read after the system alsa.conf (ALSA_CONFIG_PATH), and checks
 * that source_alsa_read returns exactly the file's samples.  After the end
 * of the file the plugin repeats stale buffer contents, so only the first
 * file-length samples are compared.
 *
 * The file plugin never fails.  Recovery is tested with sottofake
 * (tests/daemon/pcm-sottofake.c), an external ALSA plugin that plays the
 * same speech in real time, overruns at a set time (readi gives -EPIPE)
 * and is unplugged for a while (DISCONNECTED, -ENODEV, opens fail).
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sndfile.h>

#include "source-alsa.h"

#define TEST_ERR_MAX	512
#define TEST_SPEECH	"jfk.wav"
#define TEST_RATE	16000
/* sottofake's schedule, in ms of device time */
#define TEST_XRUN_MS	400
#define TEST_UNPLUG_MS	1000
#define TEST_AWAY_MS	1000

static char test_dir[256];
static int16_t *test_speech;	/* 16 kHz mono */
static size_t test_frames;

static const char *
test_path(const char *name)
{
	static char path[2][1024];
	static int i;

	i = !i;
	snprintf(path[i], sizeof(path[i]), "%s/%s", test_dir, name);
	return path[i];
}

static int
test_write_file(const char *path, const void *data, size_t len)
{
	FILE *fp;
	size_t n;

	if ((fp = fopen(path, "wb")) == NULL)
		return -1;
	n = fwrite(data, 1, len, fp);
	return fclose(fp) == 0 && n == len ? 0 : -1;
}

/* Speech as 16 kHz mono s16; a different file is a test set-up error. */
static int
test_read_speech(void)
{
	const char *dir = getenv("SOTTO_AUDIO_DIR");
	char path[1024];
	SF_INFO info;
	SNDFILE *sf;

	snprintf(path, sizeof(path), "%s/%s", dir != NULL && *dir != '\0' ?
	    dir : TEST_AUDIO_DIR, TEST_SPEECH);
	memset(&info, 0, sizeof(info));
	if ((sf = sf_open(path, SFM_READ, &info)) == NULL) {
		fprintf(stderr, "%s: %s (set SOTTO_AUDIO_DIR to the "
		    "shared audio directory)\n", path, sf_strerror(NULL));
		return -1;
	}
	if (info.samplerate != 16000 || info.channels != 1 ||
	    info.frames <= 0) {
		fprintf(stderr, "%s: not 16 kHz mono\n", path);
		sf_close(sf);
		return -1;
	}
	test_frames = (size_t)info.frames;
	test_speech = malloc(test_frames * sizeof(*test_speech));
	if (test_speech == NULL ||
	    sf_readf_short(sf, test_speech, info.frames) != info.frames) {
		sf_close(sf);
		return -1;
	}
	sf_close(sf);
	return 0;
}

/* speech.raw (mono) and speech2.raw (left: speech, right: its negation). */
static int
test_write_raw(void)
{
	int16_t *st;
	size_t i;
	int r;

	if (test_write_file(test_path("speech.raw"), test_speech,
	    test_frames * sizeof(*test_speech)) == -1)
		return -1;
	if ((st = malloc(test_frames * 2 * sizeof(*st))) == NULL)
		return -1;
	for (i = 0; i < test_frames; i++) {
		st[2 * i] = test_speech[i];
		st[2 * i + 1] = (int16_t)(test_speech[i] == INT16_MIN ?
		    INT16_MAX : -test_speech[i]);
	}
	r = test_write_file(test_path("speech2.raw"), st,
	    test_frames * 2 * sizeof(*st));
	free(st);
	return r;
}

/* The file PCMs, and sottofake with a schedule and without one. */
static int
test_write_asoundrc(void)
{
	char conf[4096], env[2048], raw[1024];
	int n;

	snprintf(raw, sizeof(raw), "%s", test_path("speech.raw"));
	n = snprintf(conf, sizeof(conf),
	    "pcm.sottotest {\n"
	    "\ttype file\n\tslave.pcm null\n\tfile \"/dev/null\"\n"
	    "\tinfile \"%s\"\n\tformat raw\n}\n"
	    "pcm.sottotest2 {\n"
	    "\ttype file\n\tslave.pcm null\n\tfile \"/dev/null\"\n"
	    "\tinfile \"%s\"\n\tformat raw\n}\n",
	    raw, test_path("speech2.raw"));
	n += snprintf(conf + n, sizeof(conf) - (size_t)n,
	    "pcm_type.sottofake {\n\tlib \"%s\"\n}\n"
	    "pcm.sottofake {\n\ttype sottofake\n\tfile \"%s\"\n"
	    "\torigin \"%s\"\n\txrun_ms \"%d\"\n\tunplug_ms %d\n"
	    "\taway_ms %d\n}\n",
	    TEST_ALSA_PLUGIN, raw, test_path("origin"), TEST_XRUN_MS,
	    TEST_UNPLUG_MS, TEST_AWAY_MS);
	n += snprintf(conf + n, sizeof(conf) - (size_t)n,
	    "pcm.sottofake_steady {\n\ttype sottofake\n\tfile \"%s\"\n"
	    "\torigin \"%s\"\n}\n", raw, test_path("origin2"));
	if (n >= (int)sizeof(conf) ||
	    test_write_file(test_path("asoundrc"), conf, (size_t)n) == -1)
		return -1;
	snprintf(env, sizeof(env), "/usr/share/alsa/alsa.conf:%s",
	    test_path("asoundrc"));
	return setenv("ALSA_CONFIG_PATH", env, 1);
}

/*
 * Capture frames * channels samples from device, reading chunk frames at a
 * time after each poll.
 */
static int16_t *
test_capture(const char *device, unsigned channels, unsigned long chunk,
    size_t frames)
{
	char err[TEST_ERR_MAX] = "";
	struct pollfd pfds[SOURCE_ALSA_MAX_POLLFDS];
	struct source_alsa *src;
	int16_t *out, *buf;
	size_t got = 0;
	long n;
	int i, npfds;

	if (source_alsa_open(device, 16000, channels, &src, err,
	    sizeof(err)) != 0)
		fail_msg("source_alsa_open: %s", err);
	npfds = source_alsa_pollfds(src, pfds, SOURCE_ALSA_MAX_POLLFDS);
	assert_true(npfds > 0);
	assert_int_equal(npfds, source_alsa_pollfds_count(src));
	out = malloc((frames + chunk) * channels * sizeof(*out));
	buf = malloc(chunk * channels * sizeof(*buf));
	assert_non_null(out);
	assert_non_null(buf);
	for (i = 0; got < frames && i < 100000; i++) {
		assert_true(poll(pfds, (nfds_t)npfds, 2000) > 0);
		n = source_alsa_read(src, buf, chunk, err, sizeof(err));
		if (n < 0)
			fail_msg("source_alsa_read: %s", err);
		assert_true((unsigned long)n <= chunk);
		memcpy(out + got * channels, buf,
		    (size_t)n * channels * sizeof(*buf));
		got += (size_t)n;
	}
	assert_true(got >= frames);
	assert_int_equal(source_alsa_xruns(src), 0);
	source_alsa_close(src);
	free(buf);
	return out;
}

static void
test_exact_samples(void **state)
{
	static const unsigned long chunks[] = { 1, 7, 400, 1600, 4096, 100000 };
	int16_t *out;
	size_t i, j;

	for (i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
		/* 1-frame reads of the whole file would take long. */
		size_t frames = chunks[i] < 400 ? 16000 : test_frames;

		out = test_capture("sottotest", 1, chunks[i], frames);
		for (j = 0; j < frames; j++) {
			if (out[j] != test_speech[j])
				fail_msg("chunk %lu: sample %zu: %d, file has "
				    "%d", chunks[i], j, out[j],
				    test_speech[j]);
		}
		free(out);
	}
}

static void
test_stereo_interleaved(void **state)
{
	int16_t *out;
	size_t j;

	out = test_capture("sottotest2", 2, 1000, test_frames);
	for (j = 0; j < test_frames; j++) {
		assert_int_equal(out[2 * j], test_speech[j]);
		assert_int_equal(out[2 * j] + out[2 * j + 1],
		    test_speech[j] == INT16_MIN ? -1 : 0);
	}
	free(out);
}

static void
test_open_errors(void **state)
{
	char err[TEST_ERR_MAX] = "";
	struct source_alsa *src = (void *)1;

	assert_int_equal(source_alsa_open("sottonosuchpcm", 16000, 1, &src,
	    err, sizeof(err)), -1);
	assert_null(src);
	assert_non_null(strstr(err, "\"sottonosuchpcm\""));
	assert_non_null(strstr(err, "cannot open for capture"));
	assert_int_equal(source_alsa_open("sottotest", 0, 1, &src, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "bad format"));
	assert_int_equal(source_alsa_open("sottotest", 16000, 0, &src, err,
	    sizeof(err)), -1);
	source_alsa_close(NULL);
}

static void
test_accessors(void **state)
{
	char err[TEST_ERR_MAX] = "";
	struct source_alsa *src;

	if (source_alsa_open("sottotest", 16000, 1, &src, err,
	    sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(source_alsa_rate(src), 16000);
	assert_int_equal(source_alsa_channels(src), 1);
	assert_int_equal(source_alsa_xruns(src), 0);
	source_alsa_close(src);
}

static double
test_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/*
 * Where in the speech n captured samples start, searching offsets lo to
 * hi; -1 when they are not the file's samples at any of them.
 */
static long
test_find(const int16_t *buf, size_t n, long lo, long hi)
{
	long off;

	if (lo < 0)
		lo = 0;
	for (off = lo; off <= hi && (size_t)off + n <= test_frames; off++)
		if (memcmp(buf, test_speech + off, n * sizeof(*buf)) == 0)
			return off;
	return -1;
}

/*
 * Read what the device has after one poll (up to 2 s): frames, or -1
 * with err.
 */
static long
test_poll_read(struct source_alsa *src, int16_t *buf, unsigned long max,
    char *err)
{
	struct pollfd pfds[SOURCE_ALSA_MAX_POLLFDS];
	int npfds;

	npfds = source_alsa_pollfds(src, pfds, SOURCE_ALSA_MAX_POLLFDS);
	assert_true(poll(pfds, (nfds_t)npfds, 2000) > 0);
	return source_alsa_read(src, buf, max, err, TEST_ERR_MAX);
}

/*
 * Capture until at least min frames came in one piece (no xrun among
 * them) or the device fails; the piece's device offset is checked
 * against the speech around expect_ms.
 */
static void
test_fake_piece(struct source_alsa *src, size_t min, double expect_ms,
    unsigned long xruns)
{
	char err[TEST_ERR_MAX] = "";
	int16_t *buf = malloc((min + 16000) * sizeof(*buf));
	size_t got = 0;
	long n, off;

	assert_non_null(buf);
	while (got < min) {
		n = test_poll_read(src, buf + got, 16000, err);
		if (n < 0)
			fail_msg("source_alsa_read: %s", err);
		if (source_alsa_xruns(src) != xruns) {
			got = 0;	/* a new piece after the xrun */
			xruns = source_alsa_xruns(src);
			continue;
		}
		got += (size_t)n;
	}
	off = test_find(buf, got, (long)(expect_ms * 16) - 8000,
	    (long)(expect_ms * 16) + 16000);
	if (off < 0)
		fail_msg("%zu frames near %.0f ms are not the speech there",
		    got, expect_ms);
	free(buf);
}

/* Overrun, unplug and return: each recovered or reported as documented. */
static void
test_xrun_and_unplug(void **state)
{
	char err[TEST_ERR_MAX] = "";
	struct source_alsa *src;
	int16_t buf[16000];
	double t0;
	long n;

	unlink(test_path("origin"));
	t0 = test_now_ms();
	if (source_alsa_open("sottofake", TEST_RATE, 1, &src, err,
	    sizeof(err)) != 0)
		fail_msg("source_alsa_open: %s", err);
	test_fake_piece(src, TEST_RATE / 5, 0, 0);
	assert_int_equal(source_alsa_xruns(src), 0);
	/* The overrun: counted, recovered, and the speech goes on. */
	while (source_alsa_xruns(src) == 0) {
		if ((n = test_poll_read(src, buf, 16000, err)) < 0)
			fail_msg("source_alsa_read across the xrun: %s", err);
		assert_true(test_now_ms() - t0 < TEST_UNPLUG_MS);
	}
	assert_true(test_now_ms() - t0 >= TEST_XRUN_MS);
	test_fake_piece(src, TEST_RATE / 5, test_now_ms() - t0, 1);
	/* Unplugged: the read reports it; opening fails while away. */
	while ((n = test_poll_read(src, buf, 16000, err)) >= 0)
		assert_true(test_now_ms() - t0 < TEST_UNPLUG_MS + 500);
	assert_non_null(strstr(err, "\"sottofake\" disconnected"));
	source_alsa_close(src);
	assert_int_equal(source_alsa_open("sottofake", TEST_RATE, 1, &src,
	    err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot open for capture"));
	assert_true(test_now_ms() - t0 < TEST_UNPLUG_MS + TEST_AWAY_MS);
	/* Back: it opens again and delivers the speech of that time. */
	while (test_now_ms() - t0 < TEST_UNPLUG_MS + TEST_AWAY_MS + 50)
		usleep(20000);
	if (source_alsa_open("sottofake", TEST_RATE, 1, &src, err,
	    sizeof(err)) != 0)
		fail_msg("source_alsa_open after the return: %s", err);
	test_fake_piece(src, TEST_RATE / 5, test_now_ms() - t0, 0);
	assert_int_equal(source_alsa_xruns(src), 0);
	source_alsa_close(src);
}

/* A reader that stops reading for longer than the buffer overruns. */
static void
test_real_overrun(void **state)
{
	char err[TEST_ERR_MAX] = "";
	struct source_alsa *src;
	int16_t buf[16000];
	double t0 = test_now_ms();
	long n;

	if (source_alsa_open("sottofake_steady", TEST_RATE, 1, &src, err,
	    sizeof(err)) != 0)
		fail_msg("source_alsa_open: %s", err);
	n = test_poll_read(src, buf, 16000, err);
	assert_true(n > 0);
	usleep(1300000);	/* more than the 1 s buffer */
	n = test_poll_read(src, buf, 16000, err);
	if (n < 0)
		fail_msg("source_alsa_read after an overrun: %s", err);
	assert_int_equal(source_alsa_xruns(src), 1);
	/* Recovered: the speech of now, no second overrun. */
	test_fake_piece(src, TEST_RATE / 5, test_now_ms() - t0, 1);
	assert_int_equal(source_alsa_xruns(src), 1);
	source_alsa_close(src);
}

static int
test_setup(void **state)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(test_dir, sizeof(test_dir), "%s/test-alsa.XXXXXX",
	    tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
	if (mkdtemp(test_dir) == NULL)
		return -1;
	if (test_read_speech() == -1 || test_write_raw() == -1 ||
	    test_write_asoundrc() == -1)
		return -1;
	return 0;
}

static int
test_teardown(void **state)
{
	unlink(test_path("speech.raw"));
	unlink(test_path("speech2.raw"));
	unlink(test_path("asoundrc"));
	unlink(test_path("origin"));
	unlink(test_path("origin2"));
	rmdir(test_dir);
	free(test_speech);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_samples),
		cmocka_unit_test(test_stereo_interleaved),
		cmocka_unit_test(test_open_errors),
		cmocka_unit_test(test_accessors),
		cmocka_unit_test(test_xrun_and_unplug),
		cmocka_unit_test(test_real_overrun),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
