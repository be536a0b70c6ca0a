#!/bin/bash
# serve_speculative.sh - speculative decoding by prompt lookup in nimserve
# (--speculative lookup): for many prompts, sent one by one and eight at a
# time (drafts verified inside batched steps), greedy and sampled with a
# seed, with logprobs and with a grammar, the answers of a server with
# speculation equal byte for byte those of one without; /v1/metrics counts
# the drafts, accepts some, and reports the acceptance rate and the tokens
# per verification step.
set -u
. "${NF_SRC:?}/tests/serve_lib.sh"
serve_py_setup spec openai
P1=$PORT PID1=$PID
start_server spec --speculative lookup --spec-k 4 --spec-ngram 3 || { echo "Bail out! server did not start"; exit 1; }
P2=$PORT PID2=$PID

N=24
[ "${NF_SAN:-}" = 1 ] && N=6
"$PY" - "$P1" "$P2" "$W/count" "$N" <<'PY'
import json, sys, urllib.request, concurrent.futures as cf
from taplib import t, done, client
p1, p2, N = sys.argv[1], sys.argv[2], int(sys.argv[4])
cs = [client(p) for p in (p1, p2)]
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
    diff = [i for i in range(N) if a[i] != b[i]]
    t(not diff, f"{N} answers, {workers} at a time: the same with speculation", [(a[i], b[i]) for i in diff[:2]])
g = {"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object", "properties": {
     "a": {"enum": ["x", "y"]}, "b": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["a", "b"],
     "additionalProperties": False}}}
ans = [c.chat.completions.create(model="stories260k", messages=[{"role": "user", "content": "x y x y"}], max_tokens=30,
                                 temperature=1.0, seed=9, response_format=g).choices[0].message.content for c in cs]
t(ans[0] == ans[1], "a guided answer is the same with speculation", ans)
m = urllib.request.urlopen(f"http://127.0.0.1:{p2}/v1/metrics", timeout=10).read().decode()
val = {l.split()[0]: float(l.split()[1]) for l in m.splitlines() if l.startswith("nimserve_spec")}
t(val.get("nimserve_spec_verify_steps_total", 0) > 0 and val.get("nimserve_spec_draft_tokens_total", 0) > 0,
  "metrics count verification steps and drafts", val)
t(0 < val.get("nimserve_spec_accepted_tokens_total", 0) <= val.get("nimserve_spec_draft_tokens_total", 0),
  "some drafts are accepted, no more than were drafted", val)
rate = val.get("nimserve_spec_acceptance_rate", -1)
t(abs(rate - val["nimserve_spec_accepted_tokens_total"] / val["nimserve_spec_draft_tokens_total"]) < 1e-4 and
  val.get("nimserve_spec_tokens_per_step", 0) > 1.0, "acceptance rate and tokens per step", val)
m1 = urllib.request.urlopen(f"http://127.0.0.1:{p1}/v1/metrics", timeout=10).read().decode()
t("nimserve_spec_verify_steps_total 0" in m1, "no speculation: no verification steps", "")
done(sys.argv[3])
PY
stop_server "$PID1"
stop_server "$PID2"
serve_py_finish
