#!/bin/bash
# bench_serve.sh - `nimfactory bench-serve` end to end, on 127.0.0.1: against
# nimserve on stories260K, a sweep of two concurrencies writes JSON (valid
# against docs/schemas/bench-serve.schema.json), Markdown and SVG whose
# numbers agree (every request counted, output and input tokens equal to
# nimserve's own counters, percentiles ordered, goodput <= throughput); an
# open loop of chat conversations (multiturn, Poisson arrivals); nf_loadgen
# on the same client prints what tests/bench/bench_serve.sh reads; then
# hostile servers (one that never answers, one that trickles keep-alives
# forever, one that streams tokens without end, one that sends a 2 MiB line,
# one that is not HTTP) and a closed
# port each fail within seconds with one clear line and exit 4.
set -u
. "${NF_SRC:?}/tests/serve_lib.sh"
serve_setup bench
NF="$B/bin/nimfactory"
LOADGEN="$B/tools/nf_loadgen"
PY="$NF_SRC/build/venv/bin/python"
for f in "$NF" "$LOADGEN"; do [ -x "$f" ] || { echo "Bail out! $f is not built"; exit 1; }; done
json_get() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
metric() { curl -s "$U/v1/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }

"$FIX" build "$W/fx" fp32 plain >/dev/null 2>"$W/fx.err" || { echo "Bail out! fixture: $(cat "$W/fx.err")"; exit 1; }
start_server s || { echo "Bail out! server did not start"; exit 1; }
U="http://127.0.0.1:$PORT"

# 1. a sweep of two loads, no warm-up, so that nimserve's counters see exactly the measured requests
gen0=$(metric nimserve_generation_tokens_total)
prompt0=$(metric nimserve_prompt_tokens_total)
"$NF" bench-serve "$U" --concurrency 1,4 --requests 12 --warmup 0 --dataset random:8,24 --seed 5 \
	--goodput ttft:2000,tpot:500 --json "$W/b.json" --markdown "$W/b.md" --svg "$W/b.svg" \
	>"$W/b.out" 2>"$W/bench.log"
okt $? "bench-serve --concurrency 1,4 exits 0"
gen1=$(metric nimserve_generation_tokens_total)
prompt1=$(metric nimserve_prompt_tokens_total)
grep -q "^== concurrency 4: 12 requests, 12 completed, 0 failed" "$W/b.out"
okt $? "the table on stdout names each load"
if "$PY" -c 'import jsonschema' 2>/dev/null; then
	"$PY" -c '
import json, sys, jsonschema
s = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(s)
jsonschema.validate(json.load(open(sys.argv[2])), s, cls=jsonschema.Draft202012Validator)' \
		"$NF_SRC/docs/schemas/bench-serve.schema.json" "$W/b.json" 2>"$W/schema.err"
	okt $? "the JSON is valid against docs/schemas/bench-serve.schema.json"
	[ -s "$W/schema.err" ] && sed 's/^/#   /' "$W/schema.err" | tail -3
else
	okt 0 "# skip build/venv lacks jsonschema"
fi
python3 - "$W/b.json" "$((gen1 - gen0))" "$((prompt1 - prompt0))" >"$W/consistent.out" 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
gen, prompt = int(sys.argv[2]), int(sys.argv[3])
runs = j["runs"]
assert [r["load"] for r in runs] == [1, 4], "loads 1 and 4 in order"
for r in runs:
    assert r["requests"] == 12 and r["completed"] == 12 and r["failed"] == 0, r
    assert r["requests_without_usage"] == 0, "nimserve sends usage"
    for m in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        s = r[m]
        assert 0 <= s["p50"] <= s["p90"] <= s["p99"], (m, s)
    assert r["ttft_ms"]["count"] == 12 and r["e2e_ms"]["count"] == 12
    assert r["ttft_ms"]["p99"] <= r["e2e_ms"]["p99"] + 1e-6, "first token before the end"
    assert 0 <= r["goodput"] <= r["request_throughput"] + 1e-9, "goodput <= throughput"
    assert r["good_requests"] <= r["completed"]
    assert abs(r["request_throughput"] * r["duration_s"] - 12) < 0.01, "req/s x s = requests"
    assert abs(r["output_token_throughput"] * r["duration_s"] - r["output_tokens"]) < 0.5
    assert abs(r["total_token_throughput"] * r["duration_s"] - r["output_tokens"] - r["input_tokens"]) < 0.5
# the same seed sends the same prompts at both loads: greedy answers of the same lengths
assert runs[0]["output_tokens"] == runs[1]["output_tokens"], "same prompts, same tokens"
assert runs[0]["output_tokens"] + runs[1]["output_tokens"] == gen, ("output tokens = nimserve's", gen)
assert runs[0]["input_tokens"] + runs[1]["input_tokens"] == prompt, ("input tokens = nimserve's", prompt)
PY
st=$?
okt $st "the numbers agree: requests counted, tokens equal to nimserve's counters, percentiles ordered, goodput <= throughput"
[ $st = 0 ] || sed 's/^/#   /' "$W/consistent.out" | tail -3
[ "$(grep -c '^| [0-9]' "$W/b.md")" = 2 ]
okt $? "the Markdown has a row per load"
python3 -c '
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert r.tag == ns + "svg"
assert len(r.findall(ns + "polyline")) == 4, "p50 and p99 of TTFT and TPOT"
assert not r.findall(".//" + ns + "script")' "$W/b.svg" 2>"$W/svg.err"
okt $? "the SVG parses, with the four latency lines and no script"

# 2. an open loop: multi-turn chat conversations arriving at 40/s
"$NF" bench-serve "$U" --rate 40 --requests 6 --warmup 1 --dataset multiturn:3 --max-tokens 8 \
	--json "$W/r.json" --quiet >"$W/r.out" 2>>"$W/bench.log"
okt $? "bench-serve --rate 40 --dataset multiturn:3 exits 0"
is "$(json_get "$W/r.json" '(j["endpoint"], j["mode"], j["runs"][0]["completed"], j["goodput_slo"], j["runs"][0]["goodput"])')" \
	"('chat', 'rate', 6, None, None)" "chat endpoint chosen for conversations; 6 turns completed; no SLO, no goodput"

# 2b. --extra-body joins every request: here a max_tokens of 3 over --max-tokens 8, and ignore_eos
"$NF" bench-serve "$U" --concurrency 2 --requests 4 --warmup 0 --max-tokens 8 \
	--extra-body '{"max_tokens": 3, "ignore_eos": true}' --json "$W/x.json" --quiet >/dev/null 2>>"$W/bench.log"
okt $? "bench-serve --extra-body exits 0"
is "$(json_get "$W/x.json" '(j["runs"][0]["completed"], j["runs"][0]["output_tokens"])')" "(4, 12)" \
	"--extra-body's members are sent: 4 answers of 3 tokens"
"$NF" bench-serve "$U" --extra-body '{"stream": false}' >/dev/null 2>>"$W/args.log"
is "$?" 2 "--extra-body setting what the generator sets: exit 2"

# 3. nf_loadgen, on the same client, keeps the fields bench_serve.sh reads
"$LOADGEN" --port "$PORT" --clients 2 --requests 2 --max-tokens 8 --json >"$W/lg.json" 2>"$W/lg.log"
okt $? "nf_loadgen exits 0"
is "$(json_get "$W/lg.json" '(j["clients"], j["requests"], j["errors"], j["tokens"], j["tokens_per_request"], all(k in j for k in ("tokens_per_second", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms")))')" \
	"(2, 4, 0, 32, 8.0, True)" "nf_loadgen --json: 4 requests of 8 tokens, the latency fields"
stop_server "$PID"

# 4. hostile servers: each fails with one line, within --timeout, exit 4
python3 - "$W/hostile.port" >"$W/hostile.log" 2>&1 <<'PY' &
import socket, sys, threading, time
modes = ["silent", "trickle", "flood", "hugeline", "nothttp"]
socks = []
for m in modes:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0)); s.listen(16); socks.append((m, s))
open(sys.argv[1] + ".tmp", "w").write(" ".join(str(s.getsockname()[1]) for _, s in socks))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
def serve(mode, c):
    try:
        c.settimeout(30)
        c.recv(65536)
        if mode == "silent":
            time.sleep(30)
        elif mode == "trickle":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
            for _ in range(300):
                c.sendall(b": keep-alive\n\n"); time.sleep(0.1)
        elif mode == "flood":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
            ev = b'data: {"choices":[{"text":"x"}]}\n\n' * 2000
            end = time.time() + 4
            while time.time() < end:
                c.sendall(ev)
        elif mode == "hugeline":
            c.sendall(b"HTTP/1.1 200 OK\r\n\r\ndata: " + b"x" * (2 << 20))
            time.sleep(5)
        else:
            c.sendall(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
    except OSError:
        pass
    c.close()
def accept(mode, s):
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(mode, c), daemon=True).start()
for m, s in socks:
    threading.Thread(target=accept, args=(m, s), daemon=True).start()
time.sleep(60)
PY
HPID=$!
PIDS="$PIDS $HPID"
for _ in $(seq 1 50); do [ -s "$W/hostile.port" ] && break; sleep 0.1; done
read -r P_SILENT P_TRICKLE P_FLOOD P_HUGE P_NOTHTTP <"$W/hostile.port"
hostile() { # NAME PORT EXPECTED-TEXT
	t0=$(date +%s.%N)
	timeout 30 "$NF" bench-serve "http://127.0.0.1:$2" --model m --requests 2 --warmup 0 \
		--concurrency 2 --timeout 1 >/dev/null 2>"$W/h-$1.log"
	st=$? t1=$(date +%s.%N)
	okt "$([ $st = 4 ] && grep -q "$3" "$W/h-$1.log" && echo 0 || echo 1)" "$1: exit 4 with '$3'"
	[ $st = 4 ] && grep -q "$3" "$W/h-$1.log" || { echo "#   exit $st"; sed 's/^/#   /' "$W/h-$1.log" | head -3; }
	okt "$(python3 -c "print(0 if $t1 - $t0 < 5 else 1)")" "$1: within 5 s (timeout 1 s)"
}
hostile "a server that never answers" "$P_SILENT" "no complete answer within 1 s"
hostile "a server that trickles keep-alives" "$P_TRICKLE" "no complete answer within 1 s"
hostile "a server that streams tokens without end" "$P_FLOOD" "no complete answer within 1 s"
hostile "a 2 MiB line" "$P_HUGE" "a line of the event stream is over 1048576 bytes"
hostile "not HTTP" "$P_NOTHTTP" "the answer is not HTTP/1.x"
kill "$HPID" 2>/dev/null
# a closed port (the server above was stopped) and bad arguments
"$NF" bench-serve "$U" --model m --requests 1 --warmup 0 >/dev/null 2>"$W/closed.log"
st=$?
okt "$([ $st = 4 ] && grep -q "cannot connect" "$W/closed.log" && echo 0 || echo 1)" "a closed port: exit 4, 'cannot connect'"
"$NF" bench-serve "$U" --concurrency 0 >/dev/null 2>"$W/args.log"
is "$?" 2 "--concurrency 0: exit 2"
"$NF" bench-serve "$U" --goodput ttft:fast >/dev/null 2>>"$W/args.log"
is "$?" 2 "--goodput ttft:fast: exit 2"
"$NF" bench-serve "$U" --dataset multiturn:2 --endpoint completions >/dev/null 2>>"$W/args.log"
is "$?" 2 "multiturn with --endpoint completions: exit 2"
sanitizer_clean
serve_done
