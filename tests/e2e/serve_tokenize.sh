#!/bin/bash
# serve_tokenize.sh - prompts are parsed and tokenized off nimserve's HTTP
# thread, on 127.0.0.1, each case bounded in time.  A ~1 MB prompt (refused
# by the worker as longer than stories260K's context) is timed alone; then,
# while it is sent again, /v1/health/live must answer in under a quarter of
# that time (skipped when tokenizing takes under 50 ms: the bound would say
# nothing).  The queue before the worker is bounded (--max-queue: 429), a
# request whose client left while queued is dropped (499), and SIGTERM with
# prompts queued answers them all and exits 0.
set -u
. "${NF_SRC:?}/tests/serve_lib.sh"
serve_setup tokenize

"$FIX" build "$W/fx" fp32 plain >/dev/null 2>"$W/fx.err" || { echo "Bail out! fixture: $(cat "$W/fx.err")"; exit 1; }
start_server t --max-queue 1 || { echo "Bail out! server did not start"; exit 1; }
T=$PID

python3 - "$PORT" >"$W/py.tap" 2>"$W/py.err" <<'EOF'
import json, socket, sys, threading, time
P = int(sys.argv[1])
n = 0
def ok(cond, name, extra=""):
    global n
    n += 1
    print(("ok %d - %s" % (n, name)) if cond else ("not ok %d - %s%s" % (n, name, "\n#   " + str(extra)[:300] if extra else "")))
    sys.stdout.flush()
def skip(name, why):
    global n
    n += 1
    print("ok %d - %s # skip %s" % (n, name, why))

# ~1 MB of prose: every word is merged, so tokenizing it takes the longest
TEXT = ("Once upon a time, there was a little girl named Lily who loved the sun. " * 13600)[:990000]
BIG = json.dumps({"model": "stories260k", "prompt": TEXT, "max_tokens": 1}).encode()
BIG_REQ = (b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(BIG)) + BIG

def read_all(s):
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            return out
        out += d

def status_of(out):
    return int(out.split(b" ", 2)[1]) if out.startswith(b"HTTP/1.1 ") else None

def big(sent=None):
    """Send the big prompt; (seconds from the last byte sent to the answer, response)."""
    s = socket.create_connection(("127.0.0.1", P), timeout=30)
    s.sendall(BIG_REQ)
    t0 = time.monotonic()
    if sent:
        sent.set()
    out = read_all(s)
    s.close()
    return time.monotonic() - t0, out

def metric(line):
    s = socket.create_connection(("127.0.0.1", P), timeout=10)
    s.sendall(b"GET /v1/metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    out = read_all(s).decode()
    s.close()
    return line in out

# 1. the time to refuse the big prompt, alone (the better of two)
runs = [big() for _ in range(2)]
t_tok = min(r[0] for r in runs)
out = runs[0][1]
ok(status_of(out) == 400 and b"context_length_exceeded" in out,
   "a 990 kB prompt is refused as longer than the context (%.0f ms)" % (t_tok * 1000), out[:300])

# 2. the same again, and /v1/health/live meanwhile on a keep-alive connection
res, sent = {}, threading.Event()
th = threading.Thread(target=lambda: res.update(r=big(sent)))
th.start()
sent.wait(30)
probe = socket.create_connection(("127.0.0.1", P), timeout=30)
f = probe.makefile("rb")
lat, during = [], 0
while th.is_alive() or not lat:
    t0 = time.monotonic()
    probe.sendall(b"GET /v1/health/live HTTP/1.1\r\nHost: t\r\n\r\n")
    st = int(f.readline().split()[1])
    size = 0
    while True:
        l = f.readline()
        if l in (b"\r\n", b""):
            break
        if l.lower().startswith(b"content-length:"):
            size = int(l.split(b":")[1])
    f.read(size)
    lat.append(time.monotonic() - t0)
    during += th.is_alive()
    time.sleep(0.002)  # leave the cores to the server
th.join()
probe.close()
worst = max(lat)
ok(status_of(res["r"][1]) == 400 and st == 200, "both answered (400 for the prompt, 200 for the probes)")
if t_tok < 0.050:
    skip("health answers within a quarter of the tokenizing time", "tokenizing took %.0f ms" % (t_tok * 1000))
else:
    ok(during >= 1 and worst < t_tok / 4,
       "/v1/health/live answered in %.1f ms at worst (%d probes during the prompt) < %.0f ms / 4"
       % (worst * 1000, during, t_tok * 1000), lat[:5])

# 3. the queue before the worker holds --max-queue (1): of four at once,
#    one is prepared, one waits, and the others get 429
outs = [None] * 4
ths = [threading.Thread(target=lambda i=i: outs.__setitem__(i, big()[1])) for i in range(4)]
for t in ths:
    t.start()
for t in ths:
    t.join()
sts = sorted(status_of(o) for o in outs)
ok(sts.count(429) >= 1 and sts.count(400) >= 1 and set(sts) <= {400, 429},
   "four big prompts at once with --max-queue 1: some 429, the rest refused by the worker", sts)

# 4. a client that leaves while its prompt waits for the worker: dropped (499)
first = threading.Thread(target=big)
first.start()
time.sleep(0.02)
s = socket.create_connection(("127.0.0.1", P), timeout=10)
s.sendall(BIG_REQ)
s.close()
first.join()
seen = False
for _ in range(100):
    if metric('nimserve_requests_total{endpoint="/v1/completions",status="499"} 1'):
        seen = True
        break
    time.sleep(0.05)
ok(seen, "a prompt whose client left while queued is dropped: counted 499")
print("1..%d" % n)
EOF
pyst=$?
while IFS= read -r line; do
	case "$line" in
	*"# skip "*) n=$((n + 1)); echo "$line" | sed "s/^ok [0-9]*/ok $n/" ;;
	ok\ *) okt 0 "${line#ok * - }" ;;
	not\ ok\ *) okt 1 "${line#not ok * - }" ;;
	\#*) echo "$line" ;;
	esac
done <"$W/py.tap"
[ "$pyst" = 0 ] || { okt 1 "python cases ran to the end (status $pyst)"; sed 's/^/# /' "$W/py.err" | tail -5; }

# 5. SIGTERM with prompts queued: each gets an answer, the server exits 0
python3 - "$PORT" "$T" >"$W/term.out" 2>&1 <<'EOF'
import json, os, signal, socket, sys, threading, time
P, pid = int(sys.argv[1]), int(sys.argv[2])
TEXT = ("Once upon a time, there was a little girl named Lily who loved the sun. " * 13600)[:990000]
BIG = json.dumps({"model": "stories260k", "prompt": TEXT, "max_tokens": 1}).encode()
REQ = (b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
       b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(BIG)) + BIG
outs = [b""] * 2
def one(i):
    s = socket.create_connection(("127.0.0.1", P), timeout=20)
    s.sendall(REQ)
    while True:
        d = s.recv(65536)
        if not d:
            break
        outs[i] += d
ths = [threading.Thread(target=one, args=(i,)) for i in range(2)]
for t in ths:
    t.start()
time.sleep(0.05)
os.kill(pid, signal.SIGTERM)
for t in ths:
    t.join()
print(" ".join(o.split(b" ", 2)[1].decode() if o.startswith(b"HTTP/1.1 ") else "none" for o in outs))
EOF
got=$(tail -1 "$W/term.out")
okt "$(case "$got" in *none*|"") echo 1 ;; *) echo 0 ;; esac)" "SIGTERM with prompts queued: each answered ($got)"
stop_server "$T" 2>/dev/null # it may have exited on the SIGTERM above
is "$?" 0 "SIGTERM: exit 0"
sanitizer_clean
serve_done
