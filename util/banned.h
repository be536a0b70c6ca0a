/*
 * banned.h - unsafe libc calls made into compile errors (after git's banned.h).
 * Include it LAST in every .c file, after all system headers.
 */
#ifndef NF_UTIL_BANNED_H
#define NF_UTIL_BANNED_H

#define NF_BANNED(func) sorry_##func##_is_banned_use_a_bounded_alternative

#undef strcpy
#define strcpy(x, y) NF_BANNED(strcpy)
#undef strcat
#define strcat(x, y) NF_BANNED(strcat)
#undef strncpy
#define strncpy(x, y, n) NF_BANNED(strncpy)
#undef strncat
#define strncat(x, y, n) NF_BANNED(strncat)
#undef sprintf
#define sprintf(...) NF_BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) NF_BANNED(vsprintf)
#undef gets
#define gets(x) NF_BANNED(gets)
#undef strtok
#define strtok(x, y) NF_BANNED(strtok)
#undef atoi
#define atoi(x) NF_BANNED(atoi)

#endif
