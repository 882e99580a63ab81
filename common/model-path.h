/*
 * A model named as sotto and sottod take it: NAME (NAME.gguf in the
 * models directories) or the path of a .gguf file.
 */
#ifndef SOTTO_MODEL_PATH_H
#define SOTTO_MODEL_PATH_H

#include <stddef.h>

/* NAME or PATH -> a readable .gguf path in buf. */
int	model_path_resolve(const char *arg, char *buf, size_t len,
	    char *err, size_t errlen);

/*
 * The command that fetches and converts models, for messages:
 * "sotto-fetch-model" installed, "scripts/fetch-model" when the program
 * runs from its build tree.
 */
const char *model_fetch_command(void);

#endif
