/*
 * report.h - gate results written for people and for CI:
 *
 *   OUT/reports/gates.json  every result: profile, gate, verdict, reason,
 *                           metrics (value, unit, comparison, threshold, ok),
 *                           per-case details; the verdict per profile and
 *                           overall; tool name and version; schema_version.
 *                           The contract is docs/schemas/gates.schema.json,
 *                           each field described in docs/reports.md
 *   OUT/reports/junit.xml   JUnit XML as GitLab and Jenkins read it: one
 *                           <testsuite> per profile, one <testcase> per case
 *                           (prompt or bound) of each gate, <failure message>
 *                           (each failed value with its bound) when failed,
 *                           <skipped message> when skipped; valid against
 *                           Jenkins' JUnit schema (tests/data/junit/junit.xsd)
 *   OUT/reports/gates.tap   TAP version 13, one test per case; skipped cases
 *                           are "ok N - ... # SKIP reason"
 *
 *   OUT/reports/summary.md  Markdown for people (report_md.c): one table with
 *                           a row per profile (device, precision, verdict and
 *                           the headline metrics its gates measured), then the
 *                           failed and skipped cases with their reasons
 *   OUT/reports/chart.svg   SVG 1.1 chart (report_svg.c): accuracy (ppl_ratio,
 *                           else agreement) against decode speed, a point per
 *                           profile labelled with its precision, its area the
 *                           engine's size; self-contained and deterministic
 *
 * and a short table for the terminal: profile, gate, measured, threshold,
 * verdict.  Every file is written atomically.  Every writer is generic over
 * metrics: one a build did not measure is absent from its reports.  None of
 * these files is in the image (factory/package.c); gates.json travels beside
 * it as an OCI artifact.
 */
#ifndef NF_FACTORY_REPORT_H
#define NF_FACTORY_REPORT_H

#include <stdio.h>

#include "factory/gates.h"

/* gates.json's schema_version: raised whenever a field is removed, renamed or
 * changes meaning; adding a field keeps it (docs/reports.md; the contract is
 * docs/schemas/gates.schema.json). */
#define NF_REPORT_SCHEMA_VERSION 1

typedef struct nf_report_meta {
	const char *model;        /* model name; NULL = omitted */
	const char *recipe;       /* recipe path or digest; NULL = omitted */
	const char *generated_at; /* ISO 8601 time; NULL = now (UTC).  Tests pin it. */
	bool skipped_gates;       /* some gate was skipped: gates.json records the next */
	bool allow_skipped_gates; /* the build packages such profiles (--allow-skipped-gates) */
} nf_report_meta;

/* The three documents as new NUL-terminated strings (caller frees *out).
 * meta may be NULL. */
int nf_report_json(char **out, const nf_gate_results *rs, const nf_report_meta *meta);
int nf_report_junit(char **out, const nf_gate_results *rs, const nf_report_meta *meta);
int nf_report_tap(char **out, const nf_gate_results *rs);
int nf_report_markdown(char **out, const nf_gate_results *rs, const nf_report_meta *meta);
/* The same results give the same bytes (meta->generated_at is not used). */
int nf_report_svg(char **out, const nf_gate_results *rs, const nf_report_meta *meta);

/* Create out_dir/reports/ and write gates.json, junit.xml, gates.tap,
 * summary.md and chart.svg there, each atomically. */
int nf_report_write(const char *out_dir, const nf_gate_results *rs, const nf_report_meta *meta);

/* The human table (one row per metric of each gate, one for a skipped gate,
 * then the overall verdict) as a new string (caller frees) / printed to f. */
int nf_report_table(char **out, const nf_gate_results *rs);
int nf_report_print_table(FILE *f, const nf_gate_results *rs);

#endif
