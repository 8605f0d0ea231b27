/* Error names and texts, generated from the one table in raft.h. */
#include "core.h"

const char *baton_strerror(int code)
{
	switch (code) {
	case 0:
		return "success";
#define BATON__ERROR_TEXT(name, value, text)                                   \
	case value:                                                            \
		return text;
		BATON_ERRORS(BATON__ERROR_TEXT)
#undef BATON__ERROR_TEXT
	default:
		return "unknown error";
	}
}

const char *baton_err_name(int code)
{
	switch (code) {
	case 0:
		return "OK";
#define BATON__ERROR_NAME(name, value, text)                                   \
	case value:                                                            \
		return "BATON_E" #name;
		BATON_ERRORS(BATON__ERROR_NAME)
#undef BATON__ERROR_NAME
	default:
		return "BATON_EUNKNOWN";
	}
}
