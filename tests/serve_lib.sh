# serve_lib.sh - what the nimserve end-to-end scripts share (sourced, bash).
#   serve_setup TAG       check the binaries and the model (bail out or skip),
#                         make the scratch folder W (removed at exit, with every
#                         server in PIDS killed); sets NIMSERVE and FIX
#   okt STATUS NAME       a test that passes when STATUS is 0
#   is GOT WANT NAME      a test that passes when the strings are equal
#   start_server NAME ARGS...
#                         nimserve on $W/fx/model_manifest.yaml, 127.0.0.1, a
#                         free port, until /v1/health/ready answers 200; sets
#                         PORT and PID (log: $W/NAME.log); 1 if it never does
#   stop_server PID       SIGTERM, up to 20 s, then SIGKILL; returns its status
#   sanitizer_clean       a test: no sanitizer report in any $W/*.log
#   serve_done            prints the plan; the exit status is the failures
n=0
fail=0
PIDS=""

serve_setup() {
	B="${NF_BUILD:?}"
	NIMSERVE="$B/bin/nimserve"
	FIX="$B/tools/nf_serve_fixture"
	for f in "$NIMSERVE" "$FIX"; do
		[ -x "$f" ] || { echo "Bail out! $f is not built"; exit 1; }
	done
	[ -f "${NF_SHARED:?}/models/stories260K/stories260K.bin" ] ||
		{ echo "1..0 # skip no stories260K model"; exit 0; }
	W=$(mktemp -d "/tmp/nf-e2e-$1-XXXXXX")
	trap serve_cleanup EXIT INT TERM
}

serve_cleanup() {
	for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
	rm -rf "$W"
}

okt() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=$((fail + 1)); fi
}

is() {
	if [ "$1" = "$2" ]; then
		okt 0 "$3"
	else
		okt 1 "$3"
		echo "#   got: '$1'"
		echo "#  want: '$2'"
	fi
}

start_server() {
	local name=$1
	shift
	rm -f "$W/$name.port"
	"$NIMSERVE" --manifest "$W/fx/model_manifest.yaml" --host 127.0.0.1 --port 0 \
		--port-file "$W/$name.port" "$@" 2>"$W/$name.log" &
	PID=$!
	PIDS="$PIDS $PID"
	for _ in $(seq 1 300); do
		if [ -s "$W/$name.port" ]; then
			PORT=$(cat "$W/$name.port")
			if curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v1/health/ready" | grep -q 200; then
				return 0
			fi
		fi
		kill -0 "$PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "# server $name did not become ready:"
	sed 's/^/#   /' "$W/$name.log" | tail -5
	return 1
}

stop_server() {
	kill -TERM "$1"
	for _ in $(seq 1 200); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$1" 2>/dev/null; then kill -KILL "$1"; fi
	wait "$1"
}

sanitizer_clean() {
	if grep -q "runtime error\|AddressSanitizer\|LeakSanitizer" "$W"/*.log; then
		okt 1 "no sanitizer reports"
		grep -h "runtime error\|Sanitizer" "$W"/*.log | head -5 | sed 's/^/# /'
	else
		okt 0 "no sanitizer reports"
	fi
}

serve_done() {
	echo "1..$n"
	[ "$fail" = 0 ]
}

# serve_py_setup NAME MODULE...: the set-up of a script whose tests are a
# Python program (PY, with tests/taplib.py on its path): skip the whole
# script when the venv lacks a module, else build the stories260K fixture
# and start server "main" (PORT, PID).
serve_py_setup() {
	serve_setup "$1"
	shift
	PY="$NF_SRC/build/venv/bin/python"
	export PYTHONPATH="$NF_SRC/tests"
	for mod in "$@"; do
		"$PY" -c "import $mod" 2>/dev/null || { echo "1..0 # skip build/venv has no $mod module"; exit 0; }
	done
	"$FIX" build "$W/fx" fp32 plain >/dev/null 2>"$W/fx.err" ||
		{ echo "Bail out! fixture: $(cat "$W/fx.err")"; exit 1; }
	start_server main || { echo "Bail out! server did not start"; exit 1; }
}

# serve_py_finish: read the Python part's count (taplib.done to $W/count),
# check the servers' logs for sanitizer reports, print the plan.
serve_py_finish() {
	read -r n fail <"$W/count" 2>/dev/null || { n=$((n + 1)); fail=1; echo "not ok $n - the Python part ended early"; }
	sanitizer_clean
	serve_done
}
