#!/bin/bash
# serve_speculative.sh - speculative decoding in nimserve, by prompt lookup
# (--speculative lookup) and by a draft engine (the image's int8-wo profile
# drafting for its fp32 one, chosen by the manifest's serving.speculative):
# for many prompts, sent one by one and eight at a time (drafts made and
# verified inside batched steps), greedy and sampled with a seed, with
# logprobs and with a grammar, the answers of a server with speculation
# equal byte for byte those of one without, and so do those of a server
# that drafts only while drafting is cheaper (--spec-adaptive 1, which
# reports what a token costs each way); /v1/metrics counts the drafts,
# accepts some, and reports the acceptance rate and the tokens per
# verification step.  Sampled at temperature 1 on other seeds, the first
# two tokens after a fixed prompt have the same distribution with
# speculation as without (a two-sample chi-square test).
set -u
. "${NF_SRC:?}/tests/serve_lib.sh"
# the server "main" it starts has no speculation: the manifest names none yet
serve_py_setup spec openai
P1=$PORT PID1=$PID
# the int8-wo engine joins the image as a second CPU profile, which the
# manifest names for drafting
"$FIX" build "$W/fx8" int8-wo plain >/dev/null 2>"$W/fx.err" || { echo "Bail out! fixture: $(cat "$W/fx.err")"; exit 1; }
ID8=$(ls "$W/fx8/engines")
mv "$W/fx8/engines/$ID8" "$W/fx/engines/$ID8"
sed -i 's/^serving:$/serving:\n  speculative: {method: draft, k: 3, draft_profile: cpu-int8-wo-tp1}/' "$W/fx/model_manifest.yaml"
printf '  - id: %s\n    name: cpu-int8-wo-tp1\n    device: cpu\n    arch: ""\n    precision: int8-wo\n    tensor_parallel: 1\n    engine: engines/%s\n    gate: passed\n' \
	"$ID8" "$ID8" >>"$W/fx/model_manifest.yaml"
FP32="--profile cpu-fp32-tp1"
start_server spec $FP32 --speculative lookup --spec-k 4 --spec-ngram 3 --spec-adaptive 0 ||
	{ echo "Bail out! server did not start"; exit 1; }
P2=$PORT PID2=$PID
start_server draft $FP32 --spec-adaptive 0 --max-context 256 || { echo "Bail out! server did not start: $(tail -3 "$W/draft.log")"; exit 1; }
P3=$PORT PID3=$PID
start_server adaptive $FP32 || { echo "Bail out! server did not start: $(tail -3 "$W/adaptive.log")"; exit 1; }
P4=$PORT PID4=$PID
grep -q "draft profile cpu-int8-wo-tp1 (.*int8-wo), 3 tokens a step" "$W/draft.log"
okt $? "the manifest's serving.speculative chooses the draft engine"
grep -q "3 tokens a step, context 256:" "$W/draft.log" && grep -q "ready: .*context 256)" "$W/draft.log"
okt $? "--max-context 256 caps the served engine and the draft engine alike"
grep -q "speculative by draft engine (adaptive" "$W/adaptive.log"
okt $? "speculation is adaptive unless --spec-adaptive 0"

# fewer answers under the sanitizers (every token is ~10x slower there)
N=24
[ "${NF_SAN:-}" = 1 ] && N=6
NF_TAP_FROM=$n "$PY" - "$P1" "$P2" "$P3" "$P4" "$W/count" "$N" <<'PY'
import math, sys, os, urllib.request, concurrent.futures as cf
from collections import Counter
from taplib import t, done, client
ports, N = sys.argv[1:5], int(sys.argv[6])
cs = [client(p) for p in ports]
names = ["speculation", "a draft engine", "adaptive drafting"]
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
        got = [list(ex.map(lambda i: run(c, i), range(N))) for c in cs]
    for k in range(1, len(cs)):
        diff = [i for i in range(N) if got[0][i] != got[k][i]]
        t(not diff, f"{N} answers, {workers} at a time: the same with {names[k - 1]}",
          [(got[0][i], got[k][i]) for i in diff[:2]])
g = {"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object", "properties": {
     "a": {"enum": ["x", "y"]}, "b": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["a", "b"],
     "additionalProperties": False}}}
ans = [c.chat.completions.create(model="stories260k", messages=[{"role": "user", "content": "x y x y"}], max_tokens=30,
                                 temperature=1.0, seed=9, response_format=g).choices[0].message.content for c in cs[:3]]
t(ans[0] == ans[1] == ans[2], "a guided answer is the same with speculation and a draft engine", ans)

def first_tokens(c, seed0, requests):
    """The first two tokens of 16 answers a request at temperature 1, seeds seed0 on."""
    def one(r):
        res = c.completions.create(model="stories260k", prompt=base[1], max_tokens=2, temperature=1.0, n=16,
                                   seed=seed0 + 16 * r, logprobs=0)
        return [ch.logprobs.tokens[:2] for ch in res.choices]
    with cf.ThreadPoolExecutor(4) as ex:  # 64 sequences: within the batch and queue
        return [toks for batch in ex.map(one, range(requests)) for toks in batch]

def chi2_two_sample(a, b):
    """Pearson's statistic of two equal-size samples, categories seen fewer
    than 10 times in both pooled; its degrees of freedom; the upper 0.001
    critical value (Wilson-Hilferty)."""
    ca, cb = Counter(a), Counter(b)
    x2, bins, pa, pb = 0.0, 0, 0, 0
    for k in set(ca) | set(cb):
        if ca[k] + cb[k] < 10:
            pa, pb = pa + ca[k], pb + cb[k]
            continue
        x2 += (ca[k] - cb[k]) ** 2 / (ca[k] + cb[k])
        bins += 1
    if pa + pb:
        x2 += (pa - pb) ** 2 / (pa + pb)
        bins += 1
    df = bins - 1
    h = 2.0 / (9 * df)
    return x2, df, df * (1 - h + 3.0902 * math.sqrt(h)) ** 3

if os.environ.get("NF_SAN") == "1":
    for what in names[:2]:
        t(True, f"the first two tokens' distribution with {what} # SKIP sampling hundreds of answers is slow "
          "under the sanitizers, and the plain build runs it")
else:
    R = 40  # 640 answers a server
    plain = first_tokens(cs[0], 1, R)
    for k in (1, 2):
        other = first_tokens(cs[k], 100000, R)
        why = []
        for i in range(2):
            x2, df, crit = chi2_two_sample([s[i] for s in plain if len(s) > i], [s[i] for s in other if len(s) > i])
            why.append((i + 1, round(x2, 1), df, round(crit, 1)))
        t(all(x2 < crit and df > 0 for _, x2, df, crit in why),
          f"the first two tokens at temperature 1, {16 * R} answers on other seeds: the same distribution with "
          f"{names[k - 1]} (token, chi-square, df, critical at 0.001: {why})", why)

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
spec_metrics(ports[1], "lookup")
val = spec_metrics(ports[2], "draft engine")
# int8-wo drafting for fp32 of the same model agrees on most greedy tokens
t(val.get("nimserve_spec_acceptance_rate", 0) > 0.5, "the int8-wo draft engine's drafts are mostly accepted", val)
t(val.get("nimserve_spec_paused_steps_total", -1) == 0 and val.get("nimserve_spec_token_seconds_with_drafts", -1) == 0,
  "--spec-adaptive 0: no step paused, no costs measured", val)
val = spec_metrics(ports[3], "adaptive drafting")
t(val.get("nimserve_spec_token_seconds_with_drafts", 0) > 0 and val.get("nimserve_spec_token_seconds_without_drafts", 0) > 0,
  "adaptive drafting measures what a token costs with drafts and without", val)
m1 = urllib.request.urlopen(f"http://127.0.0.1:{ports[0]}/v1/metrics", timeout=10).read().decode()
t("nimserve_spec_verify_steps_total 0" in m1, "no speculation: no verification steps", "")
done(sys.argv[5])
PY
read -r n fail <"$W/count" 2>/dev/null || { n=0; fail=1; echo "# the Python part ended early"; }
grep -Eq "speculation with 1 decoding sequence: [0-9.]+ ms a token with drafts, [0-9.]+ without: drafting (on|paused)" "$W/adaptive.log"
okt $? "adaptive drafting says what it chose and what a token costs each way"
for p in $PID1 $PID2 $PID3 $PID4; do stop_server "$p"; done
echo "$n $fail" >"$W/count"
serve_py_finish
