/*
 * Language names for verbose_json: OpenAI's API answers "english" where
 * libsotto says "en". The names are Whisper's own (its tokenizer's list
 * of languages, lower case), for each code a Whisper model may detect.
 */
#include <stddef.h>
#include <string.h>

#include "http.h"

static const struct {
	const char *code, *name;
} http_languages[] = {
	{ "af", "afrikaans" }, { "am", "amharic" }, { "ar", "arabic" },
	{ "as", "assamese" }, { "az", "azerbaijani" }, { "ba", "bashkir" },
	{ "be", "belarusian" }, { "bg", "bulgarian" }, { "bn", "bengali" },
	{ "bo", "tibetan" }, { "br", "breton" }, { "bs", "bosnian" },
	{ "ca", "catalan" }, { "cs", "czech" }, { "cy", "welsh" },
	{ "da", "danish" }, { "de", "german" }, { "el", "greek" },
	{ "en", "english" }, { "es", "spanish" }, { "et", "estonian" },
	{ "eu", "basque" }, { "fa", "persian" }, { "fi", "finnish" },
	{ "fo", "faroese" }, { "fr", "french" }, { "gl", "galician" },
	{ "gu", "gujarati" }, { "ha", "hausa" }, { "haw", "hawaiian" },
	{ "he", "hebrew" }, { "hi", "hindi" }, { "hr", "croatian" },
	{ "ht", "haitian creole" }, { "hu", "hungarian" },
	{ "hy", "armenian" }, { "id", "indonesian" }, { "is", "icelandic" },
	{ "it", "italian" }, { "ja", "japanese" }, { "jw", "javanese" },
	{ "ka", "georgian" }, { "kk", "kazakh" }, { "km", "khmer" },
	{ "kn", "kannada" }, { "ko", "korean" }, { "la", "latin" },
	{ "lb", "luxembourgish" }, { "ln", "lingala" }, { "lo", "lao" },
	{ "lt", "lithuanian" }, { "lv", "latvian" }, { "mg", "malagasy" },
	{ "mi", "maori" }, { "mk", "macedonian" }, { "ml", "malayalam" },
	{ "mn", "mongolian" }, { "mr", "marathi" }, { "ms", "malay" },
	{ "mt", "maltese" }, { "my", "myanmar" }, { "ne", "nepali" },
	{ "nl", "dutch" }, { "nn", "nynorsk" }, { "no", "norwegian" },
	{ "oc", "occitan" }, { "pa", "punjabi" }, { "pl", "polish" },
	{ "ps", "pashto" }, { "pt", "portuguese" }, { "ro", "romanian" },
	{ "ru", "russian" }, { "sa", "sanskrit" }, { "sd", "sindhi" },
	{ "si", "sinhala" }, { "sk", "slovak" }, { "sl", "slovenian" },
	{ "sn", "shona" }, { "so", "somali" }, { "sq", "albanian" },
	{ "sr", "serbian" }, { "su", "sundanese" }, { "sv", "swedish" },
	{ "sw", "swahili" }, { "ta", "tamil" }, { "te", "telugu" },
	{ "tg", "tajik" }, { "th", "thai" }, { "tk", "turkmen" },
	{ "tl", "tagalog" }, { "tr", "turkish" }, { "tt", "tatar" },
	{ "uk", "ukrainian" }, { "ur", "urdu" }, { "uz", "uzbek" },
	{ "vi", "vietnamese" }, { "yi", "yiddish" }, { "yo", "yoruba" },
	{ "yue", "cantonese" }, { "zh", "chinese" },
};

const char *
http_language_name(const char *code)
{
	size_t i;

	for (i = 0; i < sizeof(http_languages) / sizeof(http_languages[0]);
	    i++)
		if (strcmp(http_languages[i].code, code) == 0)
			return http_languages[i].name;
	return code;
}
