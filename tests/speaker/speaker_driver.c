/*
 * speaker-driver: the CAM++ embedding of each file through the public
 * sotto_speaker_* API, for tests/speaker/test_asan_speaker.py (which runs
 * the build-asan copy).
 *
 *	speaker-driver MODEL.gguf FILE...
 *
 * FILE is a 16 kHz mono file libsndfile reads. For each, one line on
 * standard output: the file name, then the 192 values (%.9g). A file
 * that cannot be read or embedded gets a message on standard error; the
 * exit status is then 1, after the other files.
 */
#include <stdio.h>
#include <stdlib.h>

#include <sndfile.h>

#include "sotto.h"

/* The samples of a 16 kHz mono file, malloc'd; NULL with a message. */
static float *
read_file(const char *path, size_t *ret_n)
{
	SF_INFO info = { 0 };
	SNDFILE *sf;
	float *pcm;

	if ((sf = sf_open(path, SFM_READ, &info)) == NULL) {
		fprintf(stderr, "%s: %s\n", path, sf_strerror(NULL));
		return NULL;
	}
	if (info.samplerate != SOTTO_SAMPLE_RATE || info.channels != 1 ||
	    info.frames <= 0) {
		fprintf(stderr, "%s: not 16 kHz mono audio\n", path);
		sf_close(sf);
		return NULL;
	}
	if ((pcm = malloc((size_t)info.frames * sizeof(float))) != NULL)
		*ret_n = (size_t)sf_readf_float(sf, pcm, info.frames);
	else
		fprintf(stderr, "%s: out of memory\n", path);
	sf_close(sf);
	return pcm;
}

/* 0, or 1 with a message. */
static int
embed_file(const struct sotto_speaker *s, const char *path)
{
	char err[SOTTO_ERR_MAX];
	float emb[SOTTO_SPEAKER_DIM], *pcm;
	size_t n = 0;
	int i;

	if ((pcm = read_file(path, &n)) == NULL)
		return 1;
	if (sotto_speaker_embed(s, pcm, n, emb, err) != 0) {
		fprintf(stderr, "%s: %s\n", path, err);
		free(pcm);
		return 1;
	}
	free(pcm);
	printf("%s", path);
	for (i = 0; i < SOTTO_SPEAKER_DIM; i++)
		printf(" %.9g", emb[i]);
	printf("\n");
	return 0;
}

int
main(int argc, char **argv)
{
	char err[SOTTO_ERR_MAX];
	struct sotto_speaker *s;
	int i, rc = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: speaker-driver MODEL.gguf FILE...\n");
		return 2;
	}
	if (sotto_speaker_load(argv[1], &s, err) != 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	for (i = 2; i < argc; i++)
		rc |= embed_file(s, argv[i]);
	sotto_speaker_free(s);
	return rc;
}
