#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "err.h"

int
err_set(char *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL) {
		va_start(ap, fmt);
		vsnprintf(err, SOTTO_ERR_MAX, fmt, ap);
		va_end(ap);
	}
	return code;
}

/*
 * As the programs do (common/model-path.c): the build tree is where
 * meson's build.ninja is one folder up from this library (lib/), or from
 * the test or bench program it is linked into; anything else is
 * installed. Told at run time, so the binary does not hold the path it
 * was built in.
 */
const char *
err_fetch_command(void)
{
	static const char marker[] = "/../build.ninja";
	char path[PATH_MAX], *slash;
	Dl_info info;

	if (dladdr((void *)err_fetch_command, &info) == 0 ||
	    info.dli_fname == NULL || strlen(info.dli_fname) + sizeof(marker) >
	    sizeof(path))
		return "sotto-fetch-model";
	strcpy(path, info.dli_fname);
	if ((slash = strrchr(path, '/')) == NULL)
		return "sotto-fetch-model";
	strcpy(slash, marker);
	return access(path, F_OK) == 0 ? "scripts/fetch-model" :
	    "sotto-fetch-model";
}
