# tap.sh - TAP helpers for the end-to-end scripts (sourced, POSIX sh).
#   t NAME CMD...        passes when CMD exits 0
#   is NAME GOT WANT     passes when the strings are equal
#   skip REASON          a test that cannot run here
#   finish               prints the plan; exit status = failures
nf_n=0
nf_fail=0
t() {
	nf_n=$((nf_n + 1))
	nf_name=$1
	shift
	if "$@" >"$W/t.out" 2>"$W/t.err"; then
		echo "ok $nf_n - $nf_name"
	else
		echo "not ok $nf_n - $nf_name"
		sed 's/^/#   /' "$W/t.err" | tail -8
		nf_fail=$((nf_fail + 1))
	fi
}
is() {
	nf_n=$((nf_n + 1))
	if [ "$2" = "$3" ]; then
		echo "ok $nf_n - $1"
	else
		echo "not ok $nf_n - $1"
		printf '#          got: %s\n#     expected: %s\n' "$2" "$3"
		nf_fail=$((nf_fail + 1))
	fi
}
skip() {
	nf_n=$((nf_n + 1))
	echo "ok $nf_n # skip $1"
}
finish() {
	echo "1..$nf_n"
	[ "$nf_fail" -eq 0 ]
}
# json_get FILE PYTHON-EXPR: evaluate an expression over the parsed JSON `j`.
json_get() {
	python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
