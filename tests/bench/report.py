#!/usr/bin/env python3
"""report.py - turn a benchmark's result TSV into a table for make bench.

    python3 report.py decode RESULTS.tsv --membw GBS --threads T [--peer TEXT]
                      [--doc docs/benchmarks.md] [--md-out FILE]
    python3 report.py prefill RESULTS.tsv --threads T --reps R [--peer TEXT] [--doc ...] [--md-out ...]
    python3 report.py serve RESULTS.tsv --threads T --requests R --max-tokens N
                      --slots S --ctx C [--load TEXT] [--peer TEXT] [--doc ...] [--md-out ...]

Prints the table to stdout; with --doc, replaces the text between
"<!-- bench:NAME:begin -->" and "<!-- bench:NAME:end -->" in that file (the
section is appended when the markers are missing) with the table, the date,
the machine and the command. Standard library only.
"""
import argparse
import csv
import datetime
import os
import platform
import sys


def machine():
    model, cores = "unknown CPU", os.cpu_count() or 0
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = ", %.0f GiB RAM" % (kb / 1048576)
    except (OSError, ValueError, IndexError):
        pass
    return "%s, %d cores%s, %s %s" % (model, cores, mem, platform.system(), platform.release())


def fnum(x):
    return "%.1f" % x if x >= 10 else "%.2f" % x


def decode_rows(path, membw_gbs):
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            ours, peer = float(r["ours_tok_s"]), float(r["llama_tok_s"])
            wbytes = int(r["weight_bytes"])
            ceil = membw_gbs * 1e9 / wbytes if wbytes > 0 else 0.0
            rows.append([
                r["model"], r["precision"], fnum(ours), "%s (%s)" % (fnum(peer), r["gguf"]),
                "%.2f" % (ours / peer) if peer > 0 else "-",
                "%.2f (%.2f-%.2f)" % (float(r["ratio_median"]), float(r["ratio_min"]),
                                      float(r["ratio_max"])),
                fnum(ceil), "%.0f%%" % (100.0 * ours / ceil) if ceil > 0 else "-",
                "%.0f%% (%.0f-%.0f%%)" % (float(r["paired_pct_median"]), float(r["paired_pct_min"]),
                                         float(r["paired_pct_max"])),
                "%.1f" % (wbytes / 1e6), r["kernel"],
            ])
            if r.get("lost_pct_median"):
                rows[-1].append("%.1f%% (%.1f-%.1f%%)" % (
                    float(r["lost_pct_median"]), float(r["lost_pct_min"]), float(r["lost_pct_max"])))
    head = ["model", "precision", "ours tok/s", "llama.cpp tok/s", "ours/llama.cpp",
            "ours/llama.cpp per round, median (range)", "ceiling tok/s", "% of ceiling", "% of paired ceiling, median (range)",
            "weight MB/token", "our kernel"]
    if rows and len(rows[0]) > len(head):
        head.append("vCPU time lost, median (range)")
    return head, rows


def prefill_rows(path):
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            n, ours, peer = int(r["prompt_tokens"]), float(r["ours_tok_s"]), float(r["llama_tok_s"])
            rows.append([
                r["model"], r["precision"], str(n), fnum(ours), "%s (%s)" % (fnum(peer), r["gguf"]),
                "%.2f" % (ours / peer) if peer > 0 else "-",
                "%.2f (%.2f-%.2f)" % (float(r["ratio_median"]), float(r["ratio_min"]),
                                      float(r["ratio_max"])),
                "%.1f" % float(r["ours_ttft_ms"]),
                "%.1f" % (1e3 * n / peer) if peer > 0 else "-", r["kernel"],
            ])
    head = ["model", "precision", "prompt tokens", "ours prefill tok/s", "llama.cpp prefill tok/s",
            "ours/llama.cpp", "ours/llama.cpp per round, median (range)", "ours TTFT ms",
            "llama.cpp prompt ms", "our kernel"]
    return head, rows


def prefill_main(a):
    head, rows = prefill_rows(a.tsv)
    if not rows:
        sys.exit("report.py: %s has no rows" % a.tsv)
    print(plain(head, rows))
    body = "\n".join([
        "Measured %s on %s." % (datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), machine()),
        ("Command: `%smake bench BENCH=prefill` (%d threads; best of %d rounds, a round runs ours, "
         "then llama-bench -r 5, so the two take turns).  Prompt: SmolLM2's ChatML rendering of "
         "one user question (\"What is the capital of France?\") with its default system message, "
         "tokenized by our engine's tokenizer.  Ours: `nf_prefill_bench --text` (one "
         "`nf_engine_prefill` call, best of 5 per round); TTFT = tokenizing + prefill to the "
         "first logits.  llama.cpp: `llama-bench -p N -n 0` with N our token count (random "
         "tokens of that count); its prompt time = N / its tokens/s (TTFT less tokenizing).%s"
         % (kernel_env(a), a.threads, a.reps, kernel_note(a))),
        "Peer: %s." % a.peer,
        "",
        markdown(head, rows),
    ])
    write_outputs(a, body)


def write_outputs(a, body):
    if a.md_out:
        with open(a.md_out, "w") as f:
            f.write(body + "\n")
    if a.doc:
        update_doc(a.doc, a.section, body)
        print("report.py: updated %s" % a.doc)


SERVE_LABEL = {"llama-server": "llama.cpp llama-server", "nimserve": "nimserve"}


def serve_rows(path):
    rows, raw = [], []
    with open(path) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            raw.append(r)
            name = SERVE_LABEL.get(r["server"], r["server"])
            if r["server"] == "nimserve":
                name += " (batch %s)" % r["max_batch"] if r["max_batch"] != "1" else " (one at a time)"
            rows.append([
                r.get("model", "stories260K"), name, r["precision"], r["clients"], r["requests"],
                r["tokens_per_request"], "%.0f" % float(r["tok_s"]), r["ttft_p50_ms"],
                r["ttft_p99_ms"], r["itl_p50_ms"], r["itl_p99_ms"], r["errors"],
            ])
    head = ["model", "server", "precision", "clients", "requests", "tokens/request", "tok/s",
            "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms", "errors"]
    return head, rows, raw


def serve_verdict(raw):
    """The issue's target per precision and client count >= 8: more aggregate tokens/s
    than llama-server and a lower p99 inter-token latency (batching nimserve); beside it,
    what batching gains over nimserve one request at a time."""
    pts = {}
    for r in raw:
        srv = "batch1" if r["server"] == "nimserve" and r["max_batch"] == "1" else r["server"]
        pts.setdefault((r.get("model", "stories260K"), r["precision"], int(r["clients"])), {})[srv] = r
    lines, met_all = [], True
    for (model, prec, clients), d in sorted(pts.items()):
        if clients < 8 or "nimserve" not in d or "llama-server" not in d:
            continue
        o, p = d["nimserve"], d["llama-server"]
        tps = float(o["tok_s"]) / float(p["tok_s"]) if float(p["tok_s"]) > 0 else 0
        faster = float(o["tok_s"]) > float(p["tok_s"])
        lower = float(o["itl_p99_ms"]) < float(p["itl_p99_ms"])
        met = faster and lower
        met_all = met_all and met
        b1 = d.get("batch1")
        gain = ""
        if b1 and float(b1["tok_s"]) > 0:
            gain = "; batching %.2fx the tokens/s of one at a time (%s), TTFT p99 %s ms vs %s ms" % (
                float(o["tok_s"]) / float(b1["tok_s"]), "%.0f" % float(b1["tok_s"]),
                o["ttft_p99_ms"], b1["ttft_p99_ms"])
        lines.append("- %s %s, %d clients: %s — %.2fx the tokens/s (%s vs %s), ITL p99 %s ms vs %s ms%s"
                     % (model, prec, clients, "met" if met else "NOT met", tps, "%.0f" % float(o["tok_s"]),
                        "%.0f" % float(p["tok_s"]), o["itl_p99_ms"], p["itl_p99_ms"], gain))
    head = ("Target (more aggregate tokens/s than llama-server at 8 and 32 clients with a lower "
            "p99 inter-token latency): %s in this run." % ("met" if met_all and lines else "NOT met"))
    return "\n".join([head, ""] + lines)


def markdown(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def plain(head, rows):
    w = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    fmt = "  ".join("%%-%ds" % n for n in w)
    return "\n".join([fmt % tuple(head), fmt % tuple("-" * n for n in w)] +
                     [fmt % tuple(r) for r in rows])


def kernel_env(a):
    return "BENCH_KERNEL=%s " % a.kernel if a.kernel else ""


def kernel_note(a):
    if not a.kernel:
        return ""
    return ("  Our engine forced to the %s kernel family (`--kernel %s`); llama.cpp runs the "
            "build it chose for this CPU (it has no switch for its kernel family)." % (a.kernel, a.kernel))


def update_doc(path, name, body):
    begin, end = "<!-- bench:%s:begin -->" % name, "<!-- bench:%s:end -->" % name
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    block = "%s\n%s\n%s" % (begin, body.rstrip("\n"), end)
    i, j = text.find(begin), text.find(end)
    if i >= 0 and j > i:
        text = text[:i] + block + text[j + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def doc_main(argv):
    """report.py doc DOC NAME MD: MD's table into DOC's NAME section, after
    the date and the machine."""
    if len(argv) != 3:
        sys.exit("usage: report.py doc DOC NAME MD")
    doc, name, md = argv
    body = "Measured %s on %s.\n%s" % (datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                                      machine(), open(md).read())
    update_doc(doc, name, body)
    print("report.py: updated %s" % doc)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "doc":
        return doc_main(sys.argv[2:])
    ap = argparse.ArgumentParser()
    ap.add_argument("bench", choices=("decode", "prefill", "serve"))
    ap.add_argument("tsv")
    ap.add_argument("--membw", type=float)
    ap.add_argument("--requests", type=int)
    ap.add_argument("--max-tokens", type=int)
    ap.add_argument("--slots", type=int)
    ap.add_argument("--ctx", type=int)
    ap.add_argument("--load", default="")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--peer", default="llama.cpp")
    ap.add_argument("--doc")
    ap.add_argument("--md-out")
    ap.add_argument("--workload", default="")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--kernel", default="",
                    help="the kernel family our runs were forced to (BENCH_KERNEL); its "
                         "table gets its own section of the document")
    a = ap.parse_args()
    a.section = a.bench + ("-" + a.kernel if a.kernel else "")
    if a.bench == "serve":
        return serve_main(a)
    if a.bench == "prefill":
        return prefill_main(a)
    if a.membw is None:
        sys.exit("report.py: decode needs --membw")

    head, rows = decode_rows(a.tsv, a.membw)
    if not rows:
        sys.exit("report.py: %s has no rows" % a.tsv)
    print(plain(head, rows))
    print("memory read bandwidth %.1f GB/s (%d threads); ceiling = bandwidth / weight bytes "
          "per token" % (a.membw, a.threads))
    body = "\n".join([
        "Measured %s on %s." % (datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), machine()),
        "Command: `%smake bench BENCH=decode` (%d threads, %d decode tokens, best of %d rounds; "
        "a round runs ours, then llama-bench -r 1, so the two take turns).  smollm2 is "
        "SmolLM2-135M-Instruct: ours built from its Q4_1 GGUF dequantized to float32, "
        "llama.cpp's F32 / Q8_0 files made from the same GGUF by `llama-quantize "
        "--allow-requantize`.%s" % (kernel_env(a), a.threads, a.tokens, a.reps, kernel_note(a)),
        "Peer: %s." % a.peer,
        "Measured memory read bandwidth: %.1f GB/s (`nf_membw`, %d threads, best pass of a "
        "measurement before and one after the runs); ceiling = bandwidth / our weight bytes "
        "per token.  The bandwidth of this VM swings by up to 2x within a minute, so each "
        "of our %d runs also follows its own `nf_membw` reading (512 MiB, best of 5 passes of each kind): "
        "the paired column is the median (and range) of run tok/s x weight bytes / that "
        "reading.  vCPU time lost: the share of %d spinning threads' time that the host took "
        "away in 500 ms right after each of our runs (`nf_preempt`): a decode waits for its "
        "slowest thread at every matrix, so a few percent lost there cost it several times as "
        "much, while the bandwidth reading hardly moves." % (a.membw, a.threads, a.reps, a.threads),
        "",
        markdown(head, rows),
    ])
    if a.md_out:
        with open(a.md_out, "w") as f:
            f.write(body + "\n")
    if a.doc:
        update_doc(a.doc, a.section, body)
        print("report.py: updated %s" % a.doc)


def serve_main(a):
    if None in (a.requests, a.max_tokens, a.slots, a.ctx):
        sys.exit("report.py: serve needs --requests, --max-tokens, --slots and --ctx")
    head, rows, raw = serve_rows(a.tsv)
    if not rows:
        sys.exit("report.py: %s has no rows" % a.tsv)
    verdict = serve_verdict(raw)
    print(plain(head, rows))
    print(verdict)
    body = "\n".join([
        "Measured %s on %s%s." % (datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), machine(),
                                  ", load average %s before the runs" % a.load if a.load else ""),
        ("Command: `make bench BENCH=serve` (%d engine threads per server; clients stream "
         "completions one after another, temperature 0, prompts from "
         "`build/bench/results/serve-prompts-MODEL.txt`; %s; load generator `nf_loadgen` on the same 2 cores)."
         % (a.threads, a.workload)) if a.workload else
        ("Command: `make bench BENCH=serve` (stories260K; %d engine threads per server; each client "
         "streams %d completions one after another, max_tokens %d, temperature 0, prompts from "
         "`build/bench/results/serve-prompts-MODEL.txt`; load generator `nf_loadgen` on the same 2 cores)."
         % (a.threads, a.requests, a.max_tokens)),
        ("Peer: %s; `-t %d -tb %d -np %d -c %d x context -cb` (%d slots of the model's whole context, continuous batching). "
         % (a.peer, a.threads, a.threads, a.slots, a.slots, a.slots)) +
        "Ours: `nimserve --threads %d --max-batch %d` and `--max-batch 1` (one request at a time)."
        % (a.threads, a.slots),
        "",
        markdown(head, rows),
        "",
        verdict,
    ])
    if a.md_out:
        with open(a.md_out, "w") as f:
            f.write(body + "\n")
    if a.doc:
        update_doc(a.doc, a.section, body)
        print("report.py: updated %s" % a.doc)


if __name__ == "__main__":
    main()
