/* version.h - the tool version, recorded in every engine's and image's provenance. */
#ifndef NF_UTIL_VERSION_H
#define NF_UTIL_VERSION_H
#define NF_VERSION "0.1.0"
#endif
