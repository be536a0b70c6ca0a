/*
 * eval_text.h - the shipped evaluation text of the correctness gates (the
 * default of gates.correctness.eval_text): the Constitution of the United
 * States, Articles I-VII, public domain.  Static, NUL-terminated, UTF-8
 * (ASCII in fact).
 */
#ifndef NF_FACTORY_EVAL_TEXT_H
#define NF_FACTORY_EVAL_TEXT_H

#include <stddef.h>

const char *nf_eval_text_default(void);
size_t nf_eval_text_default_len(void); /* bytes, without the NUL */

#endif
