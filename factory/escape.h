/*
 * escape.h - text cleaning for what the factory writes for machines: valid
 * UTF-8 for JSON (jansson refuses anything else), XML text and attribute
 * escaping for JUnit, and one-line TAP descriptions.  Strings we escape come
 * from recipes and model output, so every byte is treated as hostile.
 */
#ifndef NF_FACTORY_ESCAPE_H
#define NF_FACTORY_ESCAPE_H

#include <stddef.h>

/*
 * Copy len bytes of s into a new NUL-terminated string that is valid UTF-8:
 * each invalid or truncated sequence, overlong form, surrogate or embedded NUL
 * becomes U+FFFD.  Caller frees.  NULL only on allocation failure.
 */
char *nf_escape_utf8(const char *s, size_t len);

/*
 * XML 1.0 escaping of NUL-terminated s into a new string (caller frees):
 * & < > " ' become entities; tab, LF and CR are kept in text and written as
 * &#9; &#10; &#13; when attr is non-zero (attribute values normalise raw
 * whitespace); other control characters and U+FFFE/U+FFFF are removed;
 * invalid UTF-8 becomes U+FFFD.  NULL only on allocation failure.
 */
char *nf_escape_xml(const char *s, int attr);

/*
 * One-line TAP description (caller frees): control characters (newlines
 * included) become spaces, '#' becomes "\#" and '\' becomes "\\", invalid
 * UTF-8 becomes U+FFFD.  NULL only on allocation failure.
 */
char *nf_escape_tap(const char *s);

#endif
