#!/bin/bash
# serve_clients.sh - the request fields real clients send, through the
# official openai client (build/venv) against nimserve on stories260K
# (the model does not matter here): n (choices with their indices, greedy
# choices equal, streamed one after the other), logprobs in chat's and
# completions' shapes (the chosen token's logprob is the top-1 at
# temperature 0, the top alternatives' probabilities sum to at most 1),
# echo with the prompt's logprobs (the first null), logit_bias forcing a
# token, top_k 1 and min_p 1 equal to greedy, penalties changing greedy,
# min_tokens, ignore_eos, stop_token_ids, multi-part content and assistant
# content null, usage once in streams, models/{id}, /v1/version,
# /tokenize and /detokenize, ignored fields accepted and unknown ones refused.
# Then chat on SmolLM2-135M-Instruct (int8-wo, its own ChatML template and
# byte-level vocabulary): n, logprobs whose bytes spell the answer, streams
# (skipped in the sanitizer pass: building the engine there takes minutes).
set -u
. "${NF_SRC:?}/tests/serve_lib.sh"
serve_py_setup clients openai

"$PY" - "$PORT" "$W/count" <<'PY'
import json, math, sys, urllib.request, urllib.error, openai
from taplib import t, done, client
base = f"http://127.0.0.1:{sys.argv[1]}"
c = client(sys.argv[1], timeout=60)
M = "stories260k"
def post(path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
def get(path):
    try:
        with urllib.request.urlopen(base + path, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())

# models/{id}, version
m = c.models.retrieve(M)
t(m.id == M and m.object == "model", "models.retrieve", m)
try:
    c.models.retrieve("gpt-4")
    t(False, "unknown model id raises NotFoundError")
except openai.NotFoundError as e:
    t(e.status_code == 404 and e.code == "model_not_found", "unknown model id raises NotFoundError (OpenAI's error shape)", e)
st, v = get("/v1/version")
t(st == 200 and isinstance(v.get("version"), str), "/v1/version", v)

# n
r = c.completions.create(model=M, prompt="Once upon", max_tokens=12, temperature=1.0, seed=5, n=3, logprobs=0)
t(sorted(ch.index for ch in r.choices) == [0, 1, 2], "n=3: three choices, indices 0..2", r)
t(r.usage.prompt_tokens == 3 and r.usage.completion_tokens == sum(len(ch.logprobs.tokens) for ch in r.choices)
  and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens,
  "n=3: usage counts the prompt once and every choice's tokens", r.usage)
def cached_total():
    with urllib.request.urlopen(base + "/v1/metrics", timeout=30) as r:
        line = [l for l in r.read().decode().splitlines() if l.startswith("nimserve_prompt_tokens_cached_total ")]
    return int(float(line[0].split()[1]))
before = cached_total()
r = c.completions.create(model=M, prompt="Tom and his big red ball went to the park one sunny day", max_tokens=4, n=3)
delta = cached_total() - before # the first choice may reuse a kept BOS row too
t(2 * (r.usage.prompt_tokens - 1) <= delta <= 2 * (r.usage.prompt_tokens - 1) + 1,
  "n=3 on a new prompt: the second and third choices reuse the first one's prompt rows", (delta, r.usage))
g = c.completions.create(model=M, prompt="Lily went", max_tokens=16, temperature=0, n=2)
t(len(g.choices) == 2 and g.choices[0].text == g.choices[1].text and g.choices[0].text, "greedy n=2: equal texts", g)
greedy = g.choices[0].text

# completions logprobs
r = c.completions.create(model=M, prompt="Lily went", max_tokens=16, temperature=0, logprobs=3)
lp = r.choices[0].logprobs
k = len(lp.tokens)
t(k > 0 and len(lp.token_logprobs) == k and len(lp.top_logprobs) == k and len(lp.text_offset) == k,
  "completions logprobs: tokens, token_logprobs, top_logprobs, text_offset of one length", lp)
t("".join(lp.tokens) == r.choices[0].text == greedy, "completions logprobs: the tokens spell the text", lp.tokens)
t(all(len(d) <= 4 and sum(math.exp(x) for x in d.values()) <= 1 + 1e-5 for d in lp.top_logprobs),
  "completions top_logprobs: at most logprobs+1 entries, probabilities sum to at most 1", lp.top_logprobs)
t(all(abs(x - max(d.values())) < 1e-6 for x, d in zip(lp.token_logprobs, lp.top_logprobs)),
  "temperature 0: the chosen token's logprob is the top-1", lp)
t(lp.text_offset == sorted(lp.text_offset) and lp.text_offset[0] == 0, "text_offset rises from 0", lp.text_offset)

# chat logprobs
r = c.chat.completions.create(model=M, messages=[{"role": "user", "content": "Lily went"}], max_tokens=16,
                              temperature=0, logprobs=True, top_logprobs=3)
content = r.choices[0].logprobs.content
t(len(content) == r.usage.completion_tokens and all(len(e.top_logprobs) == 3 for e in content),
  "chat logprobs: one entry per token, top_logprobs 3 each", r.choices[0].logprobs)
t(bytes(b for e in content for b in e.bytes).decode() == r.choices[0].message.content,
  "chat logprobs: the bytes spell the content", content)
t(all(e.token == e.top_logprobs[0].token and abs(e.logprob - e.top_logprobs[0].logprob) < 1e-6 for e in content),
  "chat, temperature 0: the chosen token is the top-1", content)
t(all(sum(math.exp(x.logprob) for x in e.top_logprobs) <= 1 + 1e-5 and e.logprob <= 0 for e in content),
  "chat top_logprobs: probabilities sum to at most 1", content)

# echo with the prompt's logprobs
r = c.completions.create(model=M, prompt="Once upon a time", max_tokens=4, temperature=0, echo=True, logprobs=1)
lp = r.choices[0].logprobs
t(r.choices[0].text.startswith("Once upon a time") and len(r.choices[0].text) > len("Once upon a time"),
  "echo: the text starts with the prompt", r.choices[0].text)
t(len(lp.tokens) == r.usage.prompt_tokens + r.usage.completion_tokens and lp.token_logprobs[0] is None
  and lp.top_logprobs[0] is None and all(isinstance(x, float) and x <= 0 for x in lp.token_logprobs[1:]),
  "echo logprobs: every prompt token, the first null", lp)

r1 = c.completions.create(model=M, prompt="Once", max_tokens=1, temperature=0, logprobs=1)
r2 = c.completions.create(model=M, prompt="Once" + r1.choices[0].text, max_tokens=1, temperature=0, echo=True, logprobs=1)
t(len(r2.choices[0].logprobs.tokens) == 4 and
  abs(r2.choices[0].logprobs.token_logprobs[2] - r1.choices[0].logprobs.token_logprobs[0]) < 1e-4,
  "echo: a prompt token's logprob is the one it had when generated",
  (r1.choices[0].logprobs, r2.choices[0].logprobs))

# logit_bias, top_k, min_p, penalties, min_tokens, ignore_eos, stop_token_ids
st, tok = post("/tokenize", {"model": M, "prompt": "Lily saw a dog", "return_token_strs": True})
t(st == 200 and tok["count"] == len(tok["tokens"]) == len(tok["token_strs"]) >= 2 and tok["max_model_len"] == 512,
  "/tokenize", tok)
st, de = post("/detokenize", {"model": M, "tokens": tok["tokens"]})
t(st == 200 and de["prompt"] == "Lily saw a dog", "/detokenize inverts /tokenize", de)
st, lw = post("/tokenize", {"prompt": "Lily went"})
r = c.completions.create(model=M, prompt=lw["tokens"], max_tokens=16, temperature=0, echo=True)
t(r.choices[0].text == "Lily went" + greedy and r.usage.prompt_tokens == lw["count"],
  "a prompt of token ids: the text prompt's completion, echo decodes it", (r.choices[0].text, greedy))
chat = c.chat.completions.create(model=M, messages=[{"role": "user", "content": "Lily went"}], max_tokens=1)
st, tm = post("/tokenize", {"messages": [{"role": "user", "content": "Lily went"}]})
t(st == 200 and tm["count"] == chat.usage.prompt_tokens, "/tokenize messages: the chat prompt's tokens", (tm, chat.usage))
st, e = post("/tokenize", {"prompt": "x", "messages": []})
t(st == 400 and e["error"]["param"] == "prompt", "/tokenize: prompt or messages, not both", e)
dog = tok["tokens"][-1]
r = c.completions.create(model=M, prompt="Once upon", max_tokens=6, temperature=1.0, seed=3,
                         logit_bias={str(dog): 100}, logprobs=0)
t(r.choices[0].logprobs.tokens == [tok["token_strs"][-1]] * 6, "logit_bias +100 forces its token at temperature 1",
  (r.choices[0].logprobs.tokens, tok["token_strs"]))
for extra, name in (({"top_k": 1}, "top_k 1"), ({"min_p": 1.0}, "min_p 1")):
    r = c.completions.create(model=M, prompt="Lily went", max_tokens=16, temperature=1.5, seed=9, extra_body=extra)
    t(r.choices[0].text == greedy, f"{name} at temperature 1.5 is greedy", r.choices[0].text)
long = c.completions.create(model=M, prompt="Lily went", max_tokens=60, temperature=0).choices[0].text
r = c.completions.create(model=M, prompt="Lily went", max_tokens=60, temperature=0, frequency_penalty=2.0, presence_penalty=2.0)
t(r.choices[0].text != long, "presence and frequency penalties change greedy text", (long, r.choices[0].text))
r = c.completions.create(model=M, prompt="Lily went", max_tokens=60, temperature=0, extra_body={"repetition_penalty": 3.0})
t(r.choices[0].text != long, "repetition_penalty changes greedy text", (long, r.choices[0].text))
plain = c.completions.create(model=M, prompt="Once upon", max_tokens=400, temperature=0)
t(plain.choices[0].finish_reason == "stop", "greedy 'Once upon' ends at EOS before 400 tokens", plain.choices[0])
r = c.completions.create(model=M, prompt="Once upon", max_tokens=400, temperature=0, extra_body={"ignore_eos": True})
t(r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 400 and
  r.choices[0].text.startswith(plain.choices[0].text), "ignore_eos: past EOS to max_tokens", r.usage)
m_tok = plain.usage.completion_tokens + 5
r = c.completions.create(model=M, prompt="Once upon", max_tokens=400, temperature=0, extra_body={"min_tokens": m_tok})
t(r.usage.completion_tokens >= m_tok, "min_tokens holds EOS back", r.usage)
st, ids = post("/tokenize", {"prompt": greedy, "add_special_tokens": False, "return_token_strs": True})
stop_id, stop_str = ids["tokens"][3], ids["token_strs"][3]
r = c.completions.create(model=M, prompt="Lily went", max_tokens=16, temperature=0, extra_body={"stop_token_ids": [stop_id]})
cut = r.choices[0].text
t(r.choices[0].finish_reason == "stop" and len(cut) < len(greedy) and greedy.startswith(cut)
  and greedy[len(cut):].startswith(stop_str), "stop_token_ids: ends before the token", (cut, stop_str, greedy))
try:
    c.completions.create(model=M, prompt="x", max_tokens=2, logit_bias={"512": 5})
    t(False, "logit_bias past the vocabulary: 400")
except openai.BadRequestError as e:
    t(e.param == "logit_bias", "logit_bias past the vocabulary: 400 naming it", e)

# messages
a = c.chat.completions.create(model=M, messages=[
    {"role": "user", "content": [{"type": "text", "text": "Lily"}, {"type": "text", "text": "went"}]},
    {"role": "assistant", "content": None}, {"role": "user", "content": "home"}], max_tokens=8, temperature=0)
b = c.chat.completions.create(model=M, messages=[
    {"role": "user", "content": "Lily\nwent"}, {"role": "assistant", "content": ""}, {"role": "user", "content": "home"}],
    max_tokens=8, temperature=0)
t(a.choices[0].message.content == b.choices[0].message.content, "text parts joined; assistant content null", (a, b))

# streams: usage once, n streamed by index
def chunks(**kw):
    return list(c.chat.completions.create(model=M, messages=[{"role": "user", "content": "Lily went"}], max_tokens=10,
                                          temperature=0, stream=True, **kw))
s = chunks(n=2, stream_options={"include_usage": True})
with_usage = [ch for ch in s if ch.usage]
t(len(with_usage) == 1 and s[-1].usage and s[-1].choices == [] and s[-1].usage.completion_tokens > 0,
  "include_usage: one last chunk with usage and no choices", [ch.usage for ch in s])
texts = {0: "", 1: ""}
for ch in s:
    for x in ch.choices:
        texts[x.index] += x.delta.content or ""
r = c.chat.completions.create(model=M, messages=[{"role": "user", "content": "Lily went"}], max_tokens=10, temperature=0)
t(texts[0] == texts[1] == r.choices[0].message.content, "stream n=2: both choices, by index, equal the greedy text", texts)
s = chunks()
t(all(ch.usage is None for ch in s), "no include_usage: no chunk carries usage", [ch.usage for ch in s])
s = chunks(logprobs=True, top_logprobs=2)
ents = [e for ch in s for x in ch.choices if x.logprobs for e in x.logprobs.content]
t(bytes(b for e in ents for b in e.bytes).decode() == r.choices[0].message.content, "streamed logprobs spell the content", ents)

# fields: ignored ones accepted, unknown refused
r = c.chat.completions.create(model=M, messages=[{"role": "user", "content": "Lily"}], max_tokens=2, store=False,
                              metadata={"k": "v"}, service_tier="auto", user="u", parallel_tool_calls=False)
t(r.choices[0].message.content is not None, "store, metadata, service_tier, user, parallel_tool_calls accepted", r)
try:
    c.chat.completions.create(model=M, messages=[{"role": "user", "content": "x"}], max_tokens=2, extra_body={"bogus": 1})
    t(False, "an unknown field: 400")
except openai.BadRequestError as e:
    t(e.param == "bogus", "an unknown field: 400 naming it", e)
done(sys.argv[2])  # the SmolLM2 part numbers on from its count
PY
read -r n fail <"$W/count" 2>/dev/null || { n=0; fail=1; echo "# the Python part ended early"; }
stop_server "$PID"
okt $? "the stories260K server exits 0 on SIGTERM"

GGUF="$NF_SHARED/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ "${NF_SAN:-}" = 1 ] || [ ! -f "$GGUF" ]; then
	n=$((n + 1))
	echo "ok $n - SmolLM2 chat # skip sanitizer pass or no $GGUF"
	sanitizer_clean
	serve_done
	exit
fi
"$FIX" build "$W/smol" int8-wo model "$GGUF" smollm2 >/dev/null 2>"$W/smol.err" ||
	{ echo "not ok $((n + 1)) - SmolLM2 fixture: $(cat "$W/smol.err")"; echo "1..$((n + 1))"; exit 1; }
rm -rf "$W/fx"
mv "$W/smol" "$W/fx" # start_server serves $W/fx
start_server smol || { echo "not ok $((n + 1)) - SmolLM2 server did not start"; echo "1..$((n + 1))"; exit 1; }
NF_TAP_FROM=$n "$PY" - "$PORT" "$W/count" <<'PY'
import sys
from taplib import t, done, client
c = client(sys.argv[1], timeout=60)
M = "smollm2"
q = [{"role": "user", "content": [{"type": "text", "text": "What is the capital"}, {"type": "text", "text": "of France?"}]}]
r = c.chat.completions.create(model=M, messages=q, max_tokens=16, temperature=0, n=2, logprobs=True, top_logprobs=2)
a = r.choices[0].message.content
t("Paris" in a and r.choices[1].message.content == a and [x.index for x in r.choices] == [0, 1],
  "SmolLM2: text parts, greedy n=2 answers Paris twice", r.choices)
t(all(x.finish_reason == "stop" for x in r.choices), "SmolLM2: ends at <|im_end|>", r.choices)
content = r.choices[0].logprobs.content
t(bytes(b for e in content for b in e.bytes).decode() == a and "".join(e.token for e in content) == a,
  "SmolLM2 logprobs: tokens and bytes spell the answer, no end token", content)
t(all(e.token == e.top_logprobs[0].token for e in content), "SmolLM2, temperature 0: the chosen token is the top-1", content)
s = list(c.chat.completions.create(model=M, messages=[{"role": "user", "content": "What is the capital of Italy?"}],
                                   max_tokens=16, temperature=0, stream=True, stream_options={"include_usage": True}))
text = "".join(x.delta.content or "" for ch in s for x in ch.choices)
t("Rome" in text and [ch.usage is not None for ch in s].count(True) == 1 and s[-1].usage.completion_tokens > 0,
  "SmolLM2 stream: Rome, usage once", text)
done(sys.argv[2])
PY
fail0=$fail
read -r n fail <"$W/count" 2>/dev/null || { n=$((n + 1)); fail=1; echo "not ok $n - the SmolLM2 part ended early"; }
fail=$((fail + fail0))
stop_server "$PID"
okt $? "the SmolLM2 server exits 0 on SIGTERM"
sanitizer_clean
serve_done
