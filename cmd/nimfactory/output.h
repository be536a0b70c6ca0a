/* output.h - find things in a build's output folder (OUT/plan.json). */
#ifndef NF_CMD_OUTPUT_H
#define NF_CMD_OUTPUT_H

/*
 * path is an engine folder (holds config.json): *out = a copy of path.
 * path is a build output (holds plan.json): *out = OUT/engines/<id> of the
 * profile named or identified by `profile` (NULL: the only profile, or an
 * error listing them).  Caller frees *out.
 */
int nf_output_engine_dir(char **out, const char *path, const char *profile);

#endif
