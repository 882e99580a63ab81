/*
 * libFuzzer target for sottod's config reader (daemon/base/config.c,
 * daemon/base/config-file.c): the input is a config file, read through the
 * real entry point, config_load() on a path (a memfd's /proc/self/fd
 * name: a regular file in memory, nothing written to disk). A file that
 * loads must dump (as --check-config prints it) to a file that loads back
 * to the same configuration; a file that does not load must say why,
 * naming the file.
 */
#include <sys/mman.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* A memfd holding len bytes; its path in path (64 bytes). */
static int
fuzz_file(int *fd, char *path, const void *data, size_t len)
{
	if (*fd == -1) {
		if ((*fd = memfd_create("fuzz-config", MFD_CLOEXEC)) == -1)
			abort();
		snprintf(path, 64, "/proc/self/fd/%d", *fd);
	}
	if (ftruncate(*fd, 0) != 0 || (len > 0 &&
	    pwrite(*fd, data, len, 0) != (ssize_t)len))
		abort();
	return 0;
}

/* What loaded, dumped and loaded again, is the same. */
static void
fuzz_round_trip(const struct config *cfg)
{
	static int fd = -1;
	static char path[64];
	struct config back;
	char err[512], *text = NULL;
	size_t len = 0;
	FILE *fp;

	if ((fp = open_memstream(&text, &len)) == NULL)
		abort();
	config_dump(cfg, fp);
	if (fclose(fp) != 0)
		abort();
	fuzz_file(&fd, path, text, len);
	config_defaults(&back);
	if (config_load(&back, path, err, sizeof(err)) != 0) {
		fprintf(stderr, "dump does not load back: %s\n%s", err, text);
		abort();
	}
	if (memcmp(cfg, &back, sizeof(back)) != 0) {
		fprintf(stderr, "dump loads back different:\n%s", text);
		abort();
	}
	free(text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	struct config cfg;
	char err[512];

	fuzz_file(&fd, path, data, size);
	config_defaults(&cfg);
	err[0] = '\0';
	/* config_defaults() zeroes the padding too: memcmp compares values */
	if (config_load(&cfg, path, err, sizeof(err)) == 0)
		fuzz_round_trip(&cfg);
	else if (strncmp(err, path, strlen(path)) != 0 ||
	    memchr(err, '\0', sizeof(err)) == NULL)
		abort();
	return 0;
}
