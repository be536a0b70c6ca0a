#!/bin/bash
# serve_abuse.sh - nimserve under abuse, on 127.0.0.1, each case bounded in
# time: a non-streamed client that disconnects is cancelled at once; slow
# senders (slowloris) past the connection limit are closed after
# --request-timeout and others get served; oversized request line and
# header; pipelined requests; invalid UTF-8; out-of-range and edge values;
# huge stop lists and message lists; deep JSON; every method on every path;
# then SIGTERM with 32 streams in flight while new connections keep coming:
# the streams end with [DONE], newcomers get refused or 503, exit 0.
set -u
. "${NF_SRC:?}/tests/serve_lib.sh"
serve_setup abuse
metric() { curl -s "$U/v1/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }

"$FIX" build "$W/fx" fp32 plain >/dev/null 2>"$W/fx.err" || { echo "Bail out! fixture: $(cat "$W/fx.err")"; exit 1; }

start_server a --step-delay-us 5000 --max-connections 16 --request-timeout 2 || { echo "Bail out! server did not start"; exit 1; }
A=$PID
U="http://127.0.0.1:$PORT"

# 1. a non-streamed client that leaves is noticed and its sequence cancelled
c0=$(metric nimserve_requests_cancelled_total)
t0=$(date +%s.%N)
curl -s --max-time 0.5 "$U/v1/completions" -d '{"model":"stories260k","prompt":"Once","max_tokens":450,"temperature":0}' >/dev/null 2>&1
got=0
for _ in $(seq 1 40); do
	c1=$(metric nimserve_requests_cancelled_total)
	if [ "${c1:-0}" -gt "${c0:-0}" ] && [ "$(metric nimserve_active_sequences)" = 0 ]; then got=1; break; fi
	sleep 0.05
done
t1=$(date +%s.%N)
is "$got" 1 "non-streamed disconnect: the sequence is cancelled"
okt "$(python3 -c "print(0 if $t1 - $t0 < 1.5 else 1)")" "... within 1.5 s of the request (450 tokens at 5 ms/step would take 2.3 s)"
curl -s "$U/v1/metrics" | grep -q 'nimserve_requests_total{endpoint="/v1/completions",status="499"} 1'
okt $? "the abandoned request counts as status 499"

# the raw-socket cases, in Python (each bounded by socket timeouts)
python3 - "$PORT" >"$W/py.tap" 2>"$W/py.err" <<'EOF'
import json, socket, sys, threading, time
P = int(sys.argv[1])
n = 0
def ok(cond, name, extra=""):
    global n
    n += 1
    print(("ok %d - %s" % (n, name)) if cond else ("not ok %d - %s%s" % (n, name, "\n#   " + str(extra)[:300] if extra else "")))
    sys.stdout.flush()

def conn(timeout=10):
    s = socket.create_connection(("127.0.0.1", P), timeout=timeout)
    s.settimeout(timeout)
    return s

def read_response(f):
    """One HTTP/1.1 response from a file object: (status, headers, body)."""
    line = f.readline()
    if not line:
        return None, {}, b""
    status = int(line.split()[1])
    h = {}
    while True:
        l = f.readline()
        if l in (b"\r\n", b"\n", b""):
            break
        k, v = l.decode("latin-1").split(":", 1)
        h[k.strip().lower()] = v.strip()
    body = b""
    if "content-length" in h:
        body = f.read(int(h["content-length"]))
    elif h.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int(f.readline().split(b";")[0], 16)
            if size == 0:
                f.readline()
                break
            body += f.read(size)
            f.readline()
    return status, h, body

def req(method, path, body=None, headers=None):
    s = conn()
    data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else b"")
    hdr = "%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" % (method, path)
    for k, v in (headers or {}).items():
        hdr += "%s: %s\r\n" % (k, v)
    if body is not None:
        hdr += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(data)
    s.sendall(hdr.encode() + b"\r\n" + data)
    r = read_response(s.makefile("rb"))
    s.close()
    return r

def is_error(status, body, want, param=None):
    try:
        e = json.loads(body.decode("utf-8"))["error"]
        good = status == want and isinstance(e["message"], str) and isinstance(e["type"], str) \
            and "param" in e and "code" in e and (param is None or e["param"] == param)
    except Exception as x:
        return False, "%s: %r" % (x, body[:200])
    return good, "status %d body %r" % (status, body[:300])

def completion(extra, chat=False):
    b = {"model": "stories260k", "max_tokens": 4, "temperature": 0}
    b.update({"messages": [{"role": "user", "content": "Hi"}]} if chat else {"prompt": "Once"})
    b.update(extra)
    return req("POST", "/v1/chat/completions" if chat else "/v1/completions", b)

# -- slowloris: more slow senders than connection slots (16) --------------
slow = []
for i in range(24):
    try:
        s = conn(timeout=1)
        s.sendall(b"P")
        slow.append(s)
    except OSError:
        pass
closed = [0]
stop = [False]
def drip():
    msg = b"OST /v1/completions HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 100
    for k in range(len(msg)):
        if stop[0]:
            return
        for s in list(slow):
            try:
                s.sendall(msg[k:k + 1])
            except OSError:
                slow.remove(s)
                closed[0] += 1
        time.sleep(1)
th = threading.Thread(target=drip)
th.start()
t0 = time.time()
served = None
while time.time() - t0 < 8:
    try:
        st, _, body = completion({})
        if st == 200:
            served = time.time() - t0
            break
    except OSError:
        pass
    time.sleep(0.2)
time.sleep(1.5)
stop[0] = True
th.join()
for s in slow:  # closed by the server: EOF or a reset
    try:
        s.setblocking(False)
        if s.recv(1) == b"":
            closed[0] += 1
    except BlockingIOError:
        pass
    except OSError:
        closed[0] += 1
    s.close()
ok(served is not None and served < 5, "slowloris: others are served while 24 slow senders hold the 16 slots (%s s)" % (None if served is None else round(served, 1)))
ok(closed[0] >= 20, "slowloris: the server closed the slow senders (%d of 24 closed)" % closed[0])

# -- oversized request line and header: refused, server fine ----------------
st, _, _ = req("GET", "/v1/models?" + "a" * 200000)
ok(st == 414, "request line of 200 kB: 414", st)
st, _, _ = req("GET", "/v1/models", headers={"X-Big": "b" * 200000})
ok(st == 431, "header of 200 kB: 431", st)
st, _, body = req("GET", "/v1/models")
ok(st == 200, "still serving after them", st)

# -- pipelined: three requests in one write, three answers in order ---------
s = conn()
one = json.dumps({"model": "stories260k", "prompt": "Once", "max_tokens": 3, "temperature": 0}).encode()
pipe = b""
for path in ("/v1/completions", "/v1/completions"):
    pipe += b"POST " + path.encode() + b" HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(one) + one
pipe += b"GET /v1/models HTTP/1.1\r\nHost: t\r\n\r\n"
s.sendall(pipe)
f = s.makefile("rb")
rs = [read_response(f) for _ in range(3)]
s.close()
ok([r[0] for r in rs] == [200, 200, 200] and b"text_completion" in rs[1][2] and b'"list"' in rs[2][2],
   "pipelined requests: three answers in order", [r[0] for r in rs])

# -- invalid UTF-8 ------------------------------------------------------------
for what, raw in (("prompt", b'{"model":"stories260k","prompt":"a\xff\xfeb"}'),
                  ("stop", b'{"model":"stories260k","prompt":"a","stop":["\xc3("]}'),
                  ("lone surrogate", b'{"model":"stories260k","prompt":"\\ud800"}'),
                  ("overlong", b'{"model":"stories260k","prompt":"\xc0\xaf"}')):
    st, _, body = req("POST", "/v1/completions", raw)
    good, why = is_error(st, body, 400)
    ok(good, "invalid UTF-8 in the %s: 400, a well-formed error in valid UTF-8" % what, why)
# valid but odd: generated bytes never break the JSON (byte tokens)
st, _, body = completion({"prompt": "\u00e9\u2603\U0001F600", "max_tokens": 20, "temperature": 2, "seed": 3})
try:
    body.decode("utf-8"); json.loads(body); good = st == 200
except Exception:
    good = False
ok(good, "sampled output at temperature 2 is valid UTF-8 JSON", body[:200])

# -- numbers at and past their bounds ------------------------------------------
cases = [
    ({"max_tokens": 0}, 400, "max_tokens"), ({"max_tokens": -5}, 400, "max_tokens"),
    ({"max_tokens": 10 ** 12}, 400, "max_tokens"), ({"max_tokens": 1.5}, 400, "max_tokens"),
    ({"max_tokens": 1000000}, 200, None),
    ({"temperature": 0}, 200, None), ({"temperature": 2}, 200, None),
    ({"temperature": 2.0001}, 400, "temperature"), ({"temperature": -0.001}, 400, "temperature"),
    ({"top_p": 1}, 200, None), ({"top_p": 1e-9}, 200, None), ({"top_p": 0}, 400, "top_p"),
    ({"top_p": 1.01}, 400, "top_p"), ({"temperature": "hot"}, 400, "temperature"),
    ({"seed": 0}, 200, None), ({"seed": -1}, 200, None), ({"seed": 2 ** 63 - 1}, 200, None),
    ({"seed": 2 ** 64 - 1}, 400, None), ({"seed": 1.5}, 400, "seed"),
    ({"stop": ["s%d" % i for i in range(100)]}, 400, "stop"), ({"stop": ""}, 400, "stop"),
    ({"stop": [""]}, 400, "stop"), ({"stop": []}, 200, None), ({"stop": "x" * 300}, 400, "stop"),
    ({"n": 16}, 200, None), ({"n": 17}, 400, "n"), ({"n": 0}, 400, "n"),
    ({"logprobs": 20}, 200, None), ({"logprobs": 21}, 400, "logprobs"), ({"best_of": 2}, 422, "best_of"),
    ({"logit_bias": {"511": 100}}, 200, None), ({"logit_bias": {"512": 1}}, 400, "logit_bias"),
    ({"logit_bias": {"1": 100.5}}, 400, "logit_bias"), ({"top_k": -2}, 400, "top_k"),
    ({"presence_penalty": 2.01}, 400, "presence_penalty"), ({"stop_token_ids": [512]}, 400, "stop_token_ids"),
]
for extra, want, param in cases:
    st, _, body = completion(extra)
    if want == 200:
        try:
            d = json.loads(body); good = st == 200 and d["usage"]["completion_tokens"] >= 0
        except Exception:
            good = False
        ok(good, "%s: 200" % json.dumps(extra)[:60], body[:200])
    else:
        good, why = is_error(st, body, want, param)
        ok(good, "%s: %d%s" % (json.dumps(extra)[:60], want, " naming '%s'" % param if param else ""), why)
st, _, body = completion({"max_tokens": 1000000})
ok(st == 200 and json.loads(body)["choices"][0]["finish_reason"] in ("length", "stop"), "max_tokens 1000000 is clamped to the context")

# -- messages: 10,000 entries; deep nesting -------------------------------------
msgs = [{"role": "user", "content": "hi"}] * 10000
st, _, body = completion({"messages": msgs}, chat=True)
good, why = is_error(st, body, 400)
ok(good and b"context_length_exceeded" in body, "10,000 messages: 400 context_length_exceeded", why)
deep = b'{"model":"stories260k","messages":' + b"[" * 5000 + b"]" * 5000 + b"}"
st, _, body = req("POST", "/v1/chat/completions", deep)
good, why = is_error(st, body, 400)
ok(good, "JSON nested 5000 deep: 400", why)
deep = b'{"model":"stories260k","prompt":"x","user":' + b'{"a":' * 3000 + b"1" + b"}" * 3000 + b"}"
st, _, body = req("POST", "/v1/completions", deep)
good, why = is_error(st, body, 400)
ok(good, "objects nested 3000 deep: 400", why)

# -- every method on every path --------------------------------------------------
posts = ["/v1/completions", "/v1/chat/completions"]
gets = ["/v1/models", "/v1/health/live", "/v1/health/ready", "/v1/metrics", "/v1/metadata"]
bad = []
for path in posts + gets + ["/v1/nothing", "/"]:
    for m in ("GET", "HEAD", "OPTIONS", "PUT", "DELETE", "PATCH", "POST"):
        if path in posts and m == "POST":
            continue
        st, h, body = req(m, path, {} if m in ("PUT", "PATCH", "POST") else None)
        if path in gets and m in ("GET", "HEAD"):
            want = 200
        elif path in gets or path in posts:
            want = 405
        else:
            want = 404
        good = st == want
        if good and want == 405:
            good = h.get("allow") == ("POST" if path in posts else "GET, HEAD")
        if good and m != "HEAD" and want != 200:
            good = is_error(st, body, want)[0]
        if good and m == "HEAD":
            good = body == b""
        if not good:
            bad.append("%s %s -> %s %r" % (m, path, st, body[:80]))
ok(not bad, "every method on every path: 200/404/405 (+Allow), error objects well formed", bad[:4])
st, _, body = req("GET", "/v1/health/ready")
ok(st == 200, "ready after all that")
print("1..%d" % n)
EOF
pyst=$?
# renumber the Python TAP into ours
while IFS= read -r line; do
	case "$line" in
	ok\ *) okt 0 "${line#ok * - }" ;;
	not\ ok\ *) okt 1 "${line#not ok * - }" ;;
	\#*) echo "$line" ;;
	esac
done <"$W/py.tap"
[ "$pyst" = 0 ] || { okt 1 "python cases ran to the end (status $pyst)"; sed 's/^/# /' "$W/py.err" | tail -5; }
kill -0 "$A" 2>/dev/null
okt $? "server alive after the abuse"
kill -TERM "$A"; wait "$A"
is "$?" 0 "server a: SIGTERM exit 0"

# 4. SIGTERM with 32 streams in flight while new connections keep arriving
start_server b --max-batch 32 --step-delay-us 4000 --drain-timeout 20 || { echo "Bail out! server b"; exit 1; }
Bp=$PID
U="http://127.0.0.1:$PORT"
CPIDS=""
for i in $(seq 1 32); do
	timeout 60 curl -sN "$U/v1/completions" -d '{"model":"stories260k","prompt":"Once","max_tokens":250,"temperature":0,"stream":true}' >"$W/s.$i" &
	CPIDS="$CPIDS $!"
done
for _ in $(seq 1 100); do
	[ "$(metric nimserve_active_sequences)" = 32 ] && break
	sleep 0.05
done
is "$(metric nimserve_active_sequences)" 32 "32 streams in flight"
# a keep-alive connection opened before SIGTERM, used after it
python3 - "$PORT" "$W" >"$W/ka.out" 2>&1 <<'EOF' &
import os, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"GET /v1/health/live HTTP/1.1\r\nHost: t\r\n\r\n")
f = s.makefile("rb")
assert f.readline().split()[1] == b"200"
while f.readline() not in (b"\r\n", b""):
    pass
f.read(17)  # {"status":"live"}
open(os.path.join(sys.argv[2], "ka.ready"), "w").close()
for _ in range(100):  # until SIGTERM was sent
    if os.path.exists(os.path.join(sys.argv[2], "ka.go")):
        break
    time.sleep(0.05)
time.sleep(0.3)
body = b'{"model":"stories260k","prompt":"x"}'
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
print(f.readline().split()[1].decode())
EOF
KA=$!
for _ in $(seq 1 100); do [ -e "$W/ka.ready" ] && break; sleep 0.05; done
t0=$(date +%s.%N)
kill -TERM "$Bp"
: >"$W/ka.go"
: >"$W/late"
for i in $(seq 1 20); do
	curl -s -o /dev/null -w '%{http_code}\n' --max-time 5 "$U/v1/completions" \
		-d '{"model":"stories260k","prompt":"Once","max_tokens":5}' >>"$W/late" 2>/dev/null
	sleep 0.05
done
wait "$Bp"
st=$?
t1=$(date +%s.%N)
is "$st" 0 "SIGTERM under load: exit 0"
okt "$(python3 -c "print(0 if $t1 - $t0 < 20 else 1)")" "... within the drain timeout ($(python3 -c "print(round($t1 - $t0, 1))") s)"
wait $CPIDS
done_n=0
for i in $(seq 1 32); do
	[ "$(tail -n 2 "$W/s.$i" | head -n 1)" = "data: [DONE]" ] && ! grep -q '"error"' "$W/s.$i" && done_n=$((done_n + 1))
done
is "$done_n" 32 "all 32 in-flight streams finished with [DONE]"
is "$(grep -cv '^\(000\|503\)$' "$W/late")" 0 "late arrivals were refused or got 503 ($(sort "$W/late" | uniq -c | tr '\n' ' '))"
wait "$KA"
is "$(cat "$W/ka.out")" 503 "a keep-alive connection asking after SIGTERM gets 503"

sanitizer_clean
serve_done
