#!/bin/bash
# serve_api.sh - nimserve end to end on 127.0.0.1: ready only after loading,
# greedy completions (plain and streamed, completions and chat) equal the
# engine's own nf_generate, bad requests get the right status, a client that
# leaves mid-stream is cancelled, 64 concurrent clients finish, the queue
# bound gives 429 + Retry-After, /v1/metrics passes promtool, SIGTERM drains
# an in-flight stream and exits 0.
set -u
. "${NF_SRC:?}/tests/serve_lib.sh"
serve_setup serve
json() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]), end="")' "$1"; }
# SSE text joined from every chunk (completions: text, chat: delta.content)
sse_text() {
	python3 -c '
import json, sys
out = []
done = False
for line in sys.stdin.read().split("\n"):
    if not line.startswith("data: "):
        continue
    d = line[6:]
    if d == "[DONE]":
        done = True
        continue
    o = json.loads(d)
    for c in o.get("choices", []):
        out.append(c.get("text") or c.get("delta", {}).get("content") or "")
print("".join(out) + ("" if done else "<no [DONE]>"), end="")'
}

"$FIX" build "$W/fx" fp32 plain >/dev/null 2>"$W/fx.err" || { echo "Bail out! fixture: $(cat "$W/fx.err")"; exit 1; }
ENGINE=$(ls -d "$W"/fx/engines/*)

# --list-profiles: the GPU profile is listed as not fitting, with the reason
"$NIMSERVE" --manifest "$W/fx/model_manifest.yaml" --list-profiles >"$W/list.txt" 2>&1
okt $? "--list-profiles exits 0"
grep -q "h100-sxm-fp8-e4m3-tp1.*no: no GPU with compute capability 9.0 found" "$W/list.txt"
okt $? "GPU profile reported as not fitting: no GPU with compute capability 9.0"
NIM_MODEL_PROFILE=h100-sxm-fp8-e4m3-tp1 "$NIMSERVE" --manifest "$W/fx/model_manifest.yaml" --host 127.0.0.1 --port 0 >/dev/null 2>"$W/forced.err"
st=$?
is "$st" 2 "forcing the GPU profile fails at start with exit 2"
grep -q "profiles that fit: cpu-fp32-tp1" "$W/forced.err"
okt $? "the failure lists the profiles that would fit"

start_server main --step-delay-us 1000 || { echo "Bail out! server did not start"; exit 1; }
MAIN=$PID
U="http://127.0.0.1:$PORT"
grep -q "no NVIDIA driver" "$W/main.log"
okt $? "start log says plainly that there is no GPU driver"
grep -q "profile cpu-fp32-tp1 .* chosen: best fit" "$W/main.log"
okt $? "start log says why the profile won"

is "$(curl -s "$U/v1/health/live" | json 'd["status"]')" "live" "/v1/health/live"
is "$(curl -s "$U/v1/models" | json 'd["data"][0]["id"]')" "stories260k" "/v1/models lists the model"
PID_ID=$(grep -o '[0-9a-f]\{64\}' "$W/fx/model_manifest.yaml" | tail -1)
is "$(curl -s "$U/v1/metadata" | json 'd["profile"]["id"]')" "$PID_ID" "/v1/metadata reports the chosen profile id"

# greedy equals nf_generate
for prompt in "Once upon" "The cat sat on the" ""; do
	want=$("$FIX" generate "$ENGINE" 60 "$prompt")
	body=$(python3 -c 'import json,sys; print(json.dumps({"model":"stories260k","prompt":sys.argv[1],"max_tokens":60,"temperature":0}))' "$prompt")
	curl -s "$U/v1/completions" -d "$body" >"$W/c.json"
	is "$(json 'd["choices"][0]["text"]' <"$W/c.json")" "$want" "greedy completion equals nf_generate for '$prompt'"
	body=$(python3 -c 'import json,sys; print(json.dumps({"model":"stories260k","prompt":sys.argv[1],"max_tokens":60,"temperature":0,"stream":True}))' "$prompt")
	is "$(curl -sN "$U/v1/completions" -d "$body" | sse_text)" "$want" "streamed greedy completion equals nf_generate for '$prompt'"
done
if "$B/bin/nimfactory" run --help 2>&1 | grep -q "nimfactory run ENGINE_DIR"; then
	want=$("$B/bin/nimfactory" run "$ENGINE" --prompt "Once upon" --max-tokens 60 --quiet 2>/dev/null)
	got=$(curl -s "$U/v1/completions" -d '{"model":"stories260k","prompt":"Once upon","max_tokens":60,"temperature":0}' | json 'd["choices"][0]["text"]')
	is "$got" "$want" "greedy completion equals nimfactory run"
	body='{"model":"stories260k","prompt":"Once upon","max_tokens":60,"temperature":0,"stream":true}'
	is "$(curl -sN "$U/v1/completions" -d "$body" | sse_text)" "$want" "streamed greedy completion equals nimfactory run"
else
	n=$((n + 1)); echo "ok $n # skip nimfactory run is not built"
fi
is "$(json 'd["usage"]["completion_tokens"] + d["usage"]["prompt_tokens"] == d["usage"]["total_tokens"]' <"$W/c.json")" "True" "usage adds up"
# "Once upon" ran several times above: its prefix is in a kept sequence
curl -s "$U/v1/completions" -d '{"model":"stories260k","prompt":"Once upon","max_tokens":5,"temperature":0}' >"$W/c2.json"
is "$(json 'd["usage"]["prompt_tokens"] > 1 and d["usage"]["prompt_tokens_details"]["cached_tokens"] == d["usage"]["prompt_tokens"] - 1' <"$W/c2.json")" "True" \
	"a repeated prompt reuses all but its last token from the prefix cache (usage.prompt_tokens_details)"
want=$("$FIX" generate "$ENGINE" 30 "Lily went")
body='{"model":"stories260k","messages":[{"role":"user","content":"Lily went"}],"max_tokens":30,"temperature":0}'
is "$(curl -s "$U/v1/chat/completions" -d "$body" | json 'd["choices"][0]["message"]["content"]')" "$want" "chat (plain template) equals nf_generate"
body='{"model":"stories260k","messages":[{"role":"user","content":"Lily went"}],"max_tokens":30,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}'
curl -sN "$U/v1/chat/completions" -d "$body" >"$W/chat.sse"
is "$(sse_text <"$W/chat.sse")" "$want" "streamed chat equals nf_generate"
is "$(tail -n 2 "$W/chat.sse" | head -n 1)" "data: [DONE]" "stream ends in data: [DONE]"
grep -q '"choices":\[\],"usage":{"prompt_tokens"' "$W/chat.sse"
okt $? "include_usage adds a usage chunk"
# stop string and seeded sampling
full=$("$FIX" generate "$ENGINE" 60 "Once upon")
stop=$(echo "$full" | cut -c12-16)
body=$(python3 -c 'import json,sys; print(json.dumps({"model":"stories260k","prompt":"Once upon","max_tokens":60,"temperature":0,"stop":[sys.argv[1]]}))' "$stop")
curl -s "$U/v1/completions" -d "$body" >"$W/stop.json"
is "$(json 'd["choices"][0]["text"]' <"$W/stop.json")" "$(echo "$full" | cut -c1-11)" "stop string cuts the text before it"
is "$(json 'd["choices"][0]["finish_reason"]' <"$W/stop.json")" "stop" "finish_reason stop"
s1=$(curl -s "$U/v1/completions" -d '{"model":"stories260k","prompt":"Once","max_tokens":30,"temperature":1,"seed":7}' | json 'd["choices"][0]["text"]')
s2=$(curl -s "$U/v1/completions" -d '{"model":"stories260k","prompt":"Once","max_tokens":30,"temperature":1,"seed":7}' | json 'd["choices"][0]["text"]')
is "$s1" "$s2" "same seed, same sampled text"

# bad requests
code() { curl -s -o "$W/err.json" -w '%{http_code}' "$@"; }
is "$(code "$U/v1/completions" -d '{"model":')" 400 "malformed JSON: 400"
is "$(json 'd["error"]["type"]' <"$W/err.json")" "invalid_request_error" "error object has a type"
is "$(code "$U/v1/completions" -d '{"model":"stories260k","prompt":"x","max_tokens":"9"}')" 400 "wrong type: 400"
is "$(json 'd["error"]["param"]' <"$W/err.json")" "max_tokens" "error names the param"
is "$(code "$U/v1/completions" -d '{"model":"stories260k","prompt":"x","frobnicate":1}')" 400 "unknown field: 400"
is "$(code "$U/v1/completions" -d '{"model":"stories260k","prompt":"x","n":3,"best_of":4}')" 422 "best_of other than n: 422"
is "$(code "$U/v1/completions" -d '{"model":"gpt-4","prompt":"x"}')" 404 "unknown model: 404"
is "$(json 'd["error"]["code"]' <"$W/err.json")" "model_not_found" "model_not_found code"
is "$(code "$U/v1/nothing")" 404 "unknown path: 404"
is "$(code "$U/v1/completions")" 405 "GET on a POST endpoint: 405"
head -c 5000000 /dev/zero | tr '\0' 'a' >"$W/big"
is "$(code "$U/v1/completions" -H 'Content-Type: application/json' --data-binary @"$W/big")" 413 "5 MB body: 413"
is "$(code "$U/v1/completions" -H 'Transfer-Encoding: chunked' --data-binary @"$W/big")" 413 "5 MB chunked body: 413"
python3 -c 'import json; print(json.dumps({"model":"stories260k","prompt":"Once upon a time there was a cat. " * 200}))' >"$W/long.json"
is "$(code "$U/v1/completions" --data-binary @"$W/long.json")" 400 "prompt longer than the context: 400"
is "$(json 'd["error"]["code"]' <"$W/err.json")" "context_length_exceeded" "context_length_exceeded code"
grep -q "maximum context length is 512 tokens" "$W/err.json"
okt $? "the message gives the context length"

# a client that disconnects mid-stream is cancelled
curl -sN --max-time 0.1 "$U/v1/completions" -d '{"model":"stories260k","prompt":"Once","max_tokens":450,"stream":true}' >/dev/null 2>&1
cancelled=0
for _ in $(seq 1 50); do
	curl -s "$U/v1/metrics" >"$W/m.txt"
	if grep -q '^nimserve_requests_cancelled_total [1-9]' "$W/m.txt" && grep -q '^nimserve_active_sequences 0' "$W/m.txt"; then
		cancelled=1
		break
	fi
	sleep 0.1
done
is "$cancelled" 1 "mid-stream disconnect cancels the sequence"

# 64 concurrent clients, bounded in time, all equal to the reference
want=$("$FIX" generate "$ENGINE" 24 "Tom had a")
CPIDS=""
for i in $(seq 1 64); do
	if [ $((i % 2)) = 0 ]; then s=true; else s=false; fi
	timeout 60 curl -sN "$U/v1/completions" -d "{\"model\":\"stories260k\",\"prompt\":\"Tom had a\",\"max_tokens\":24,\"temperature\":0,\"stream\":$s}" >"$W/cc.$i" &
	CPIDS="$CPIDS $!"
done
t0=$(date +%s)
wait $CPIDS
t1=$(date +%s)
good=0
for i in $(seq 1 64); do
	if [ $((i % 2)) = 0 ]; then got=$(sse_text <"$W/cc.$i"); else got=$(json 'd["choices"][0]["text"]' <"$W/cc.$i" 2>/dev/null); fi
	[ "$got" = "$want" ] && good=$((good + 1))
done
is "$good" 64 "64 concurrent clients all got the greedy text ($((t1 - t0)) s)"
kill -0 "$MAIN" 2>/dev/null
okt $? "server alive after all that"

curl -s "$U/v1/metrics" >"$W/metrics.txt"
if command -v promtool >/dev/null; then
	promtool check metrics <"$W/metrics.txt" >"$W/promtool.out" 2>&1
	okt $? "promtool check metrics"
else
	n=$((n + 1)); echo "ok $n # skip promtool not installed"
fi
grep -q '^nimserve_prompt_tokens_cached_total [1-9]' "$W/metrics.txt" &&
	grep -q 'nimserve_time_to_first_token_seconds_count [1-9]' "$W/metrics.txt" &&
	grep -q 'nimserve_requests_total{endpoint="/v1/completions",status="413"} 2' "$W/metrics.txt"
okt $? "metrics count cached prompt tokens, TTFT observations and the 413s"

# SIGTERM with a stream in flight: it finishes, then exit 0
curl -sN "$U/v1/completions" -d '{"model":"stories260k","prompt":"Once","max_tokens":300,"temperature":0,"stream":true}' >"$W/drain.sse" &
CURL=$!
sleep 0.2
stop_server "$MAIN"
is "$?" 0 "SIGTERM: exit 0"
wait "$CURL"
is "$(tail -n 2 "$W/drain.sse" | head -n 1)" "data: [DONE]" "the in-flight stream finished before exit"
is "$(code "$U/v1/health/live")" 000 "no longer listening"

# a bounded queue: past it 429 with Retry-After (each request runs ~1 s, so all six
# arrive while the first one runs, however slowly a loaded machine starts them)
start_server small --max-batch 1 --max-queue 1 --step-delay-us 5000 || { echo "Bail out! small server"; exit 1; }
SMALL=$PID
U="http://127.0.0.1:$PORT"
CPIDS=""
for i in $(seq 1 6); do
	timeout 60 curl -s -D "$W/q.h.$i" -o /dev/null -w '%{http_code}\n' "$U/v1/completions" \
		-d '{"model":"stories260k","prompt":"Once","max_tokens":200}' >"$W/q.$i" &
	CPIDS="$CPIDS $!"
done
wait $CPIDS
n429=$(cat "$W"/q.[0-9] | grep -c 429)
n200=$(cat "$W"/q.[0-9] | grep -c 200)
okt $([ "$n429" -ge 1 ] && [ "$n200" -ge 2 ] && echo 0 || echo 1) "queue bound: $n200 served, $n429 refused with 429"
grep -qi '^Retry-After: 1' $(grep -l '^HTTP/1\.[01] 429' "$W"/q.h.[0-9] | head -1)
okt $? "429 carries Retry-After"
stop_server "$SMALL"
is "$?" 0 "second server: SIGTERM exit 0"

# --max-context: each sequence holds at most that many tokens; past the engine's, no start
start_server short --max-context 64 || { echo "Bail out! short server"; exit 1; }
SHORT=$PID
U="http://127.0.0.1:$PORT"
python3 -c 'import json; print(json.dumps({"model":"stories260k","prompt":"Once upon a time there was a cat. " * 8}))' >"$W/mid.json"
is "$(code "$U/v1/completions" --data-binary @"$W/mid.json")" 400 "--max-context 64: a prompt of about 80 tokens is too long"
grep -q "maximum context length is 64 tokens" "$W/err.json"
okt $? "and the message gives the capped context"
is "$(code "$U/v1/completions" -d '{"model":"stories260k","prompt":"Once","max_tokens":8}')" 200 "a short one is served"
stop_server "$SHORT"
"$NIMSERVE" --manifest "$W/fx/model_manifest.yaml" --host 127.0.0.1 --port 0 --max-context 100000 2>"$W/long.log"
st=$?
okt $([ "$st" -ne 0 ] && grep -q "max-context.*1 to the engine's 512" "$W/long.log" && echo 0 || echo 1) \
	"--max-context beyond the engine's 512: exit $st, $(tail -1 "$W/long.log" | cut -c1-120)"
sanitizer_clean
serve_done
