/* commands.h - the nimfactory subcommands; each returns a process exit status. */
#ifndef NF_CMD_COMMANDS_H
#define NF_CMD_COMMANDS_H

struct nf_command {
	const char *name;
	int (*run)(int argc, char **argv); /* argv[0] is the command name */
	const char *summary;
};

/* Print "nimfactory CMD: <the last error>" on stderr; returns the exit
 * status of err (util/error.h). */
int nf_cmd_fail(const char *cmd, int err);

int nf_cmd_version(int argc, char **argv);
int nf_cmd_precisions(int argc, char **argv);
int nf_cmd_cache(int argc, char **argv);
int nf_cmd_validate(int argc, char **argv);
int nf_cmd_plan(int argc, char **argv);
int nf_cmd_build(int argc, char **argv);
int nf_cmd_run(int argc, char **argv);
int nf_cmd_convert(int argc, char **argv);
int nf_cmd_tokenize(int argc, char **argv);
int nf_cmd_detokenize(int argc, char **argv);
int nf_cmd_inspect(int argc, char **argv);
int nf_cmd_push(int argc, char **argv);
int nf_cmd_promote(int argc, char **argv);
int nf_cmd_bench_serve(int argc, char **argv);

#endif
