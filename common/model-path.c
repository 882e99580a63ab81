/*
 * Finding a model by name: the same names sotto-fetch-model and
 * scripts/fetch-model write (NAME.gguf), looked up where a user, the
 * source tree or the install put them.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model-path.h"

/* Directory of the running executable, for a build tree's ../../models. */
static int
exe_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;

	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if ((slash = strrchr(buf, '/')) == NULL)
		return -1;
	*slash = '\0';
	return 0;
}

static int
try_path(char *buf, size_t len, const char *dir, const char *suffix,
    const char *name)
{
	if (buf == NULL || len == 0)
		return 0;
	snprintf(buf, len, "%s%s/%s.gguf", dir, suffix, name);
	return access(buf, R_OK) == 0;
}

int
model_path_resolve(const char *arg, char *buf, size_t len, char *err,
    size_t errlen)
{
	const char *env = getenv("SOTTO_MODEL_DIR");
	char exe[PATH_MAX];
	size_t n = strlen(arg);

	if (strchr(arg, '/') != NULL || (n > 5 &&
	    strcmp(arg + n - 5, ".gguf") == 0)) {
		snprintf(buf, len, "%s", arg);
		return 0;
	}
	if (env != NULL && *env != '\0' && try_path(buf, len, env, "", arg))
		return 0;
	if (try_path(buf, len, ".", "/models", arg))
		return 0;
	if (exe_dir(exe, sizeof(exe)) == 0 &&
	    try_path(buf, len, exe, "/../../models", arg))
		return 0;
	if (try_path(buf, len, SOTTO_MODELDIR, "", arg))
		return 0;
	if (try_path(buf, len, SOTTO_DATADIR, "/sotto/models", arg))
		return 0;
	snprintf(err, errlen, "model '%s' not found in $SOTTO_MODEL_DIR, "
	    "./models, the build tree, %s or %s/sotto/models; run '%s %s' "
	    "or pass a .gguf path", arg, SOTTO_MODELDIR, SOTTO_DATADIR,
	    model_fetch_command(), arg);
	return -1;
}

/*
 * One build is both run where it was built (the tests, a developer) and
 * installed, so whether this is the build tree is told at run time: a
 * program there sits one folder below meson's build.ninja (client/sotto,
 * daemon/sottod). Not by a compiled-in path of the build directory,
 * which would make the binaries differ with the directory they were
 * built in (reproducible builds).
 */
const char *
model_fetch_command(void)
{
	static const char marker[] = "/../build.ninja";
	char path[PATH_MAX];

	if (exe_dir(path, sizeof(path) - sizeof(marker)) != 0)
		return "sotto-fetch-model";
	strcat(path, marker);
	return access(path, F_OK) == 0 ? "scripts/fetch-model" :
	    "sotto-fetch-model";
}
