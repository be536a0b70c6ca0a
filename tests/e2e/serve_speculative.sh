#!/bin/bash
# serve_speculative.sh - speculative decoding in nimserve, by prompt lookup
# (--speculative lookup) and by a draft engine (the image's int8-wo profile
# drafting for its fp32 one, chosen by the manifest's serving.speculative):
# for many prompts, sent one by one and eight at a time (drafts made and
# verified inside batched steps), greedy and sampled with a seed, with
# logprobs and with a grammar, the answers of a server with speculation
# equal byte for byte those of one without; /v1/metrics counts the drafts,
# accepts some, and reports the acceptance rate and the tokens per
# verification step.
set -u
. "${NF_SRC:?}/tests/serve_lib.sh"
serve_setup spec
PY="$NF_SRC/build/venv/bin/python"
if ! "$PY" -c 'import openai' 2>/dev/null; then
	echo "1..0 # skip build/venv has no openai module"
	exit 0
fi
"$FIX" build "$W/fx" fp32 plain >/dev/null 2>"$W/fx.err" || { echo "Bail out! fixture: $(cat "$W/fx.err")"; exit 1; }
# the int8-wo engine joins the image as a second CPU profile, which the
# manifest names for drafting
"$FIX" build "$W/fx8" int8-wo plain >/dev/null 2>"$W/fx.err" || { echo "Bail out! fixture: $(cat "$W/fx.err")"; exit 1; }
ID8=$(ls "$W/fx8/engines")
mv "$W/fx8/engines/$ID8" "$W/fx/engines/$ID8"
sed -i 's/^serving:$/serving:\n  speculative: {method: draft, k: 3, draft_profile: cpu-int8-wo-tp1}/' "$W/fx/model_manifest.yaml"
printf '  - id: %s\n    name: cpu-int8-wo-tp1\n    device: cpu\n    arch: ""\n    precision: int8-wo\n    tensor_parallel: 1\n    engine: engines/%s\n    gate: passed\n' \
	"$ID8" "$ID8" >>"$W/fx/model_manifest.yaml"
FP32="--profile cpu-fp32-tp1"
start_server plain $FP32 --speculative none || { echo "Bail out! server did not start"; exit 1; }
P1=$PORT PID1=$PID
start_server spec $FP32 --speculative lookup --spec-k 4 --spec-ngram 3 || { echo "Bail out! server did not start"; exit 1; }
P2=$PORT PID2=$PID
start_server draft $FP32 || { echo "Bail out! server did not start: $(tail -3 "$W/draft.log")"; exit 1; }
P3=$PORT PID3=$PID
grep -q "draft profile cpu-int8-wo-tp1 (.*int8-wo), 3 tokens a step" "$W/draft.log"
okt $? "the manifest's serving.speculative chooses the draft engine"

N=24
[ "${NF_SAN:-}" = 1 ] && N=6
"$PY" - "$P1" "$P2" "$P3" "$W/count" "$N" "$n" <<'PY'
import json, sys, urllib.request, concurrent.futures as cf, openai
p1, p2, p3, N = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[5])
cs = [openai.OpenAI(base_url=f"http://127.0.0.1:{p}/v1", api_key="none", timeout=120, max_retries=0) for p in (p1, p2, p3)]
n, fails = int(sys.argv[6]), 0
def t(cond, name, extra=""):
    global n, fails
    n += 1
    print(("ok" if cond else "not ok") + f" {n} - {name}")
    if not cond:
        fails += 1
        print("# " + str(extra)[:600].replace("\n", "\n# "))
base = ["Once upon a time", "The cat sat on the mat. The cat sat on the", "Lily and Ben went to the park. Lily and Ben",
        "One day, a little girl named Lily found a ball. Lily found a", "Tom had a red car. Tom had a red car. Tom had",
        "The sun was shining. The birds were singing. The sun was"]
prompts = [base[i % len(base)] + " " * (i // len(base)) for i in range(N)]
def run(c, i):
    kw = dict(model="stories260k", prompt=prompts[i], max_tokens=48)
    if i % 3 == 1:
        kw.update(temperature=1.0, seed=i)
    elif i % 3 == 2:
        kw.update(temperature=0.0, logprobs=2)
    else:
        kw.update(temperature=0.0)
    r = c.completions.create(**kw)
    ch = r.choices[0]
    lp = ch.logprobs.token_logprobs if ch.logprobs else None
    return ch.text, ch.finish_reason, lp
for workers in (1, 8):
    with cf.ThreadPoolExecutor(workers) as ex:
        a = list(ex.map(lambda i: run(cs[0], i), range(N)))
        b = list(ex.map(lambda i: run(cs[1], i), range(N)))
        d = list(ex.map(lambda i: run(cs[2], i), range(N)))
    diff = [i for i in range(N) if a[i] != b[i]]
    t(not diff, f"{N} answers, {workers} at a time: the same with speculation", [(a[i], b[i]) for i in diff[:2]])
    diff = [i for i in range(N) if a[i] != d[i]]
    t(not diff, f"{N} answers, {workers} at a time: the same with a draft engine", [(a[i], d[i]) for i in diff[:2]])
g = {"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object", "properties": {
     "a": {"enum": ["x", "y"]}, "b": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["a", "b"],
     "additionalProperties": False}}}
ans = [c.chat.completions.create(model="stories260k", messages=[{"role": "user", "content": "x y x y"}], max_tokens=30,
                                 temperature=1.0, seed=9, response_format=g).choices[0].message.content for c in cs]
t(ans[0] == ans[1] == ans[2], "a guided answer is the same with speculation and a draft engine", ans)
def spec_metrics(port, what):
    m = urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/metrics", timeout=10).read().decode()
    val = {l.split()[0]: float(l.split()[1]) for l in m.splitlines() if l.startswith("nimserve_spec")}
    t(val.get("nimserve_spec_verify_steps_total", 0) > 0 and val.get("nimserve_spec_draft_tokens_total", 0) > 0,
      f"{what}: metrics count verification steps and drafts", val)
    t(0 < val.get("nimserve_spec_accepted_tokens_total", 0) <= val.get("nimserve_spec_draft_tokens_total", 0),
      f"{what}: some drafts are accepted, no more than were drafted", val)
    rate = val.get("nimserve_spec_acceptance_rate", -1)
    t(abs(rate - val["nimserve_spec_accepted_tokens_total"] / val["nimserve_spec_draft_tokens_total"]) < 1e-4 and
      val.get("nimserve_spec_tokens_per_step", 0) > 1.0, f"{what}: acceptance rate and tokens per step", val)
    return val
spec_metrics(p2, "lookup")
val = spec_metrics(p3, "draft engine")
# int8-wo drafting for fp32 of the same model agrees on most greedy tokens
t(val.get("nimserve_spec_acceptance_rate", 0) > 0.5, "the int8-wo draft engine's drafts are mostly accepted", val)
m1 = urllib.request.urlopen(f"http://127.0.0.1:{p1}/v1/metrics", timeout=10).read().decode()
t("nimserve_spec_verify_steps_total 0" in m1, "no speculation: no verification steps", "")
open(sys.argv[4], "w").write(f"{n} {fails}\n")
PY
read -r n fail2 <"$W/count" 2>/dev/null || { fail2=1; }
fail=$((fail + fail2))
stop_server "$PID1"
stop_server "$PID2"
stop_server "$PID3"
sanitizer_clean
serve_done
