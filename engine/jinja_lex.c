/*
 * jinja_lex.c - the Jinja lexer: template text and the tokens inside
 * {{ }}, {% %} and {# #}, with jinja2's whitespace control as Hugging Face
 * configures it (trim_blocks: the newline after a block or comment tag goes;
 * lstrip_blocks: spaces before a block or comment tag alone on its line go;
 * "-" strips all whitespace on its side, "+" turns the trimming off).
 */
#include "engine/jinja_int.h"

#include <stdio.h>
#include <string.h>

#include "util/error.h"
#include "util/banned.h"

typedef struct lexer {
	nf_jarena *a;
	const char *what;
	const char *s;
	size_t n, pos;
	unsigned line, col;
	nf_jtok *toks;
	size_t ntok, cap;
	int depth; /* open brackets: "}}" inside {{ {'a': {}} }} closes a dict */
} lexer;

static bool is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

static int lex_err(lexer *L, unsigned line, unsigned col, const char *msg)
{
	return nf_error_set(NF_EINPUT, "%s:%u:%u: %s", L->what, line, col, msg);
}

static void advance(lexer *L, size_t k)
{
	for (size_t i = 0; i < k && L->pos < L->n; i++, L->pos++) {
		if (L->s[L->pos] == '\n') {
			L->line++;
			L->col = 1;
		} else if (((unsigned char)L->s[L->pos] & 0xc0) != 0x80) {
			L->col++; /* columns count code points */
		}
	}
}

static nf_jtok *push(lexer *L, nf_jtok_kind k, const char *text, size_t len)
{
	if (L->ntok == L->cap) {
		size_t cap = L->cap ? L->cap * 2 : 64;
		nf_jtok *t = nf_jarena_alloc(L->a, cap * sizeof(*t));
		if (!t)
			return NULL;
		if (L->ntok)
			memcpy(t, L->toks, L->ntok * sizeof(*t));
		L->toks = t;
		L->cap = cap;
	}
	nf_jtok *t = &L->toks[L->ntok++];
	memset(t, 0, sizeof(*t));
	t->kind = k;
	t->line = L->line;
	t->col = L->col;
	t->text = text ? nf_jarena_strdup(L->a, text, len) : "";
	t->len = len;
	return text && !t->text ? NULL : t;
}

static int mem_err(lexer *L)
{
	return L->a->over ? lex_err(L, L->line, L->col, "template too large")
			  : nf_error_set(NF_ENOMEM, "%s: out of memory", L->what);
}

/* Append code point cp as UTF-8. */
static size_t put_utf8(char *o, unsigned long cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* One escape at p[0] == '\\' (p[1] exists); writes its bytes to o, returns
 * the source bytes used.  Python's unicode-escape: unknown escapes stay. */
static size_t unescape_one(const char *p, size_t left, char *o, size_t *olen)
{
	static const char from[] = "\\'\"abfnrtv\n", to[] = "\\'\"\a\b\f\n\r\t\v";
	const char *hit = strchr(from, p[1]);
	if (hit && p[1]) {
		size_t k = (size_t)(hit - from);
		*olen = k < sizeof(to) - 1 ? (o[0] = to[k], 1) : 0; /* backslash-newline: nothing */
		return 2;
	}
	if (p[1] >= '0' && p[1] <= '7') {
		unsigned long cp = 0;
		size_t i = 1;
		for (; i < 4 && i < left && p[i] >= '0' && p[i] <= '7'; i++)
			cp = cp * 8 + (unsigned long)(p[i] - '0');
		*olen = put_utf8(o, cp);
		return i;
	}
	size_t digits = p[1] == 'x' ? 2 : p[1] == 'u' ? 4 : p[1] == 'U' ? 8 : 0;
	if (digits && left >= 2 + digits) {
		unsigned long cp = 0;
		size_t i = 0;
		for (; i < digits && hexval(p[2 + i]) >= 0; i++)
			cp = cp * 16 + (unsigned long)hexval(p[2 + i]);
		if (i == digits && cp <= 0x10ffff) {
			*olen = put_utf8(o, cp);
			return 2 + digits;
		}
	}
	o[0] = '\\';
	*olen = 1;
	return 1;
}

static int lex_string(lexer *L)
{
	char q = L->s[L->pos];
	size_t i = L->pos + 1;
	while (i < L->n && L->s[i] != q)
		i += L->s[i] == '\\' && i + 1 < L->n ? 2 : 1;
	if (i >= L->n)
		return lex_err(L, L->line, L->col, "unterminated string");
	size_t raw = i - L->pos - 1;
	char *o = nf_jarena_alloc(L->a, raw + 1); /* escapes never grow: \U0010ffff is 10 in, 4 out */
	if (!o)
		return mem_err(L);
	size_t on = 0;
	for (size_t j = L->pos + 1; j < i;) {
		if (L->s[j] == '\\') {
			size_t w = 0;
			j += unescape_one(L->s + j, i - j, o + on, &w);
			on += w;
		} else {
			o[on++] = L->s[j++];
		}
	}
	nf_jtok *t = push(L, JT_STRING, NULL, 0);
	if (!t)
		return mem_err(L);
	t->text = o;
	t->len = on;
	advance(L, i + 1 - L->pos);
	return 0;
}

static size_t digits_at(const char *s, size_t i, size_t n)
{
	size_t j = i;
	while (j < n && ((s[j] >= '0' && s[j] <= '9') || (s[j] == '_' && j > i)))
		j++;
	return j;
}

static int lex_number(lexer *L)
{
	size_t j = digits_at(L->s, L->pos, L->n);
	bool is_float = false;
	if (j + 1 < L->n && L->s[j] == '.' && L->s[j + 1] >= '0' && L->s[j + 1] <= '9') {
		j = digits_at(L->s, j + 1, L->n);
		is_float = true;
	}
	if (j < L->n && (L->s[j] == 'e' || L->s[j] == 'E')) {
		size_t k = j + 1 + (j + 1 < L->n && (L->s[j + 1] == '+' || L->s[j + 1] == '-'));
		if (k < L->n && L->s[k] >= '0' && L->s[k] <= '9') {
			j = digits_at(L->s, k, L->n);
			is_float = true;
		}
	}
	char buf[64];
	size_t bn = 0;
	for (size_t k = L->pos; k < j; k++)
		if (L->s[k] != '_' && bn + 1 < sizeof(buf))
			buf[bn++] = L->s[k];
	buf[bn] = '\0';
	if (j - L->pos >= sizeof(buf))
		return lex_err(L, L->line, L->col, "number literal too long");
	nf_jtok *t = push(L, is_float ? JT_FLOAT : JT_INT, buf, bn);
	if (!t)
		return mem_err(L);
	if (is_float) {
		t->f = strtod(buf, NULL);
	} else {
		long long v = 0;
		for (size_t k = 0; k < bn; k++)
			if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, buf[k] - '0', &v))
				return lex_err(L, L->line, L->col, "integer literal too large");
		t->i = v;
	}
	advance(L, j - L->pos);
	return 0;
}

static int lex_op(lexer *L)
{
	static const char *two[] = {"//", "**", "==", "!=", "<=", ">="};
	const char *p = L->s + L->pos;
	size_t len = 0;
	for (size_t i = 0; i < sizeof(two) / sizeof(two[0]); i++)
		if (L->pos + 1 < L->n && p[0] == two[i][0] && p[1] == two[i][1])
			len = 2;
	if (!len && strchr("+-*/%~<>=()[]{},.:|", p[0]) && p[0])
		len = 1;
	if (!len) {
		char msg[64];
		snprintf(msg, sizeof(msg), "unexpected character '%c'", p[0]);
		return lex_err(L, L->line, L->col, (unsigned char)p[0] < 0x20 || (unsigned char)p[0] > 0x7e
							   ? "unexpected character" : msg);
	}
	if (strchr("([{", p[0]))
		L->depth++;
	else if (strchr(")]}", p[0]) && L->depth > 0)
		L->depth--;
	if (!push(L, JT_OP, p, len))
		return mem_err(L);
	advance(L, len);
	return 0;
}

/* At an end tag ("%}" for blocks, "}}" for variables, each maybe with - or +)?
 * Returns its length, 0 if not there; *strip: 1 for '-', 2 for '+'. */
static size_t end_tag_at(const lexer *L, char close, int *strip)
{
	const char *p = L->s + L->pos;
	size_t left = L->n - L->pos;
	*strip = 0;
	if (L->depth > 0)
		return 0;
	if (left >= 3 && (p[0] == '-' || p[0] == '+') && p[1] == close && p[2] == '}') {
		*strip = p[0] == '-' ? 1 : 2;
		return 3;
	}
	return left >= 2 && p[0] == close && p[1] == '}' ? 2 : 0;
}

static void skip_ws(lexer *L)
{
	size_t k = 0;
	while (L->pos + k < L->n && is_space(L->s[L->pos + k]))
		k++;
	advance(L, k);
}

/* After an end tag: "-" eats all whitespace; trim_blocks eats one newline
 * after a block or comment tag unless "+" says not to. */
static void after_tag(lexer *L, int strip, bool block, bool *line_starting)
{
	*line_starting = false;
	if (strip == 1) {
		size_t k = 0;
		while (L->pos + k < L->n && is_space(L->s[L->pos + k]))
			k++;
		*line_starting = k > 0 && L->s[L->pos + k - 1] == '\n';
		advance(L, k);
	} else if (block && strip != 2 && L->pos < L->n && L->s[L->pos] == '\n') {
		advance(L, 1);
		*line_starting = true;
	}
}

/* The inside of a {{ }} or {% %} whose opening (at line:col) was just passed. */
static int lex_tag(lexer *L, char close, bool *line_starting, unsigned line, unsigned col)
{
	nf_jtok *begin = push(L, close == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, NULL, 0);
	L->depth = 0;
	if (!begin)
		return mem_err(L);
	begin->line = line;
	begin->col = col;
	for (;;) {
		int strip, err = 0;
		skip_ws(L);
		if (L->pos >= L->n)
			return lex_err(L, line, col, close == '%' ? "unclosed block tag" : "unclosed variable tag");
		size_t end = end_tag_at(L, close, &strip);
		if (end) {
			if (!push(L, close == '%' ? JT_BLOCK_END : JT_VAR_END, NULL, 0))
				return mem_err(L);
			advance(L, end);
			after_tag(L, strip, close == '%', line_starting);
			return 0;
		}
		char ch = L->s[L->pos];
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_') {
			size_t j = L->pos;
			while (j < L->n && ((L->s[j] >= 'a' && L->s[j] <= 'z') || (L->s[j] >= 'A' && L->s[j] <= 'Z') ||
					    (L->s[j] >= '0' && L->s[j] <= '9') || L->s[j] == '_'))
				j++;
			if (!push(L, JT_NAME, L->s + L->pos, j - L->pos))
				return mem_err(L);
			advance(L, j - L->pos);
		} else if (ch >= '0' && ch <= '9') {
			err = lex_number(L);
		} else if (ch == '\'' || ch == '"') {
			err = lex_string(L);
		} else {
			err = lex_op(L);
		}
		if (err)
			return err;
	}
}

static int lex_comment(lexer *L, bool *line_starting)
{
	unsigned line = L->line, col = L->col;
	const char *end = NULL;
	for (size_t i = L->pos + 2; i + 1 < L->n && !end; i++)
		if (L->s[i] == '#' && L->s[i + 1] == '}')
			end = L->s + i;
	if (!end)
		return lex_err(L, line, col, "unclosed comment");
	int strip = end[-1] == '-' && end - 1 > L->s + L->pos + 2 ? 1 : end[-1] == '+' ? 2 : 0;
	advance(L, (size_t)(end + 2 - (L->s + L->pos)));
	after_tag(L, strip, true, line_starting);
	return 0;
}

/* The text before a tag at L->s[at], after "-" and lstrip_blocks. */
static int lex_text(lexer *L, size_t at, char kind, bool line_starting)
{
	size_t end = at;
	char mod = at + 2 < L->n ? L->s[at + 2] : 0;
	if (mod == '-') {
		while (end > L->pos && is_space(L->s[end - 1]))
			end--;
	} else if (kind != '{' && mod != '+') {
		size_t l = end;
		while (l > L->pos && L->s[l - 1] != '\n')
			l--;
		bool blank = true;
		for (size_t i = l; i < end; i++)
			blank = blank && is_space(L->s[i]);
		if ((l > L->pos || line_starting) && blank)
			end = l;
	}
	if (end > L->pos && !push(L, JT_TEXT, L->s + L->pos, end - L->pos))
		return mem_err(L);
	advance(L, at - L->pos);
	return 0;
}

/* A copy with \r\n and \r made \n and one trailing newline dropped, as
 * jinja2 reads a template (keep_trailing_newline is off). */
static char *normalize(nf_jarena *a, const char *src, size_t len, size_t *out_len)
{
	char *o = nf_jarena_alloc(a, len + 1);
	size_t n = 0;
	if (!o)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		if (src[i] == '\r') {
			o[n++] = '\n';
			i += i + 1 < len && src[i + 1] == '\n';
		} else {
			o[n++] = src[i];
		}
	}
	if (n && o[n - 1] == '\n')
		n--;
	o[n] = '\0';
	*out_len = n;
	return o;
}

int nf_jinja_lex(nf_jtok **out, size_t *n, nf_jarena *a, const char *src, size_t len,
		 const char *what)
{
	lexer L = {.a = a, .what = what, .line = 1, .col = 1};
	bool line_starting = true;
	L.s = normalize(a, src, len, &L.n);
	if (!L.s)
		return mem_err(&L);
	while (L.pos < L.n) {
		const char *tag = NULL;
		for (size_t i = L.pos; i + 1 < L.n && !tag; i++)
			if (L.s[i] == '{' && (L.s[i + 1] == '{' || L.s[i + 1] == '%' || L.s[i + 1] == '#'))
				tag = L.s + i;
		size_t at = tag ? (size_t)(tag - L.s) : L.n;
		int err = lex_text(&L, at, tag ? tag[1] : '{', line_starting);
		if (err)
			return err;
		if (!tag)
			break;
		size_t open = 2 + (at + 2 < L.n && (L.s[at + 2] == '-' || L.s[at + 2] == '+'));
		if (tag[1] == '#') {
			err = lex_comment(&L, &line_starting);
		} else {
			unsigned line = L.line, col = L.col;
			advance(&L, open);
			err = lex_tag(&L, tag[1] == '%' ? '%' : '}', &line_starting, line, col);
		}
		if (err)
			return err;
	}
	if (!push(&L, JT_EOF, NULL, 0))
		return mem_err(&L);
	*out = L.toks;
	*n = L.ntok;
	return 0;
}
