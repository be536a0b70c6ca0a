#!/bin/sh
# recipe_errors.sh - `nimfactory validate` on every recipe in tests/data/recipes:
# each bad one must print exactly the line its first comment expects
# ("# expect: LINE:COL: message", printed as "FILE:LINE:COL: message") on
# stderr, nothing on stdout, and exit 2; the good ones exit 0; hostile
# inputs (alias bomb, deep nesting, oversize, random bytes) are refused fast.
set -u
NF_SRC=${NF_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
NF_BUILD=${NF_BUILD:-$NF_SRC/build}
BIN=$NF_BUILD/bin/nimfactory
DATA=$NF_SRC/tests/data/recipes
TMP=$(mktemp -d "${TMPDIR:-/tmp}/nf-recipe-e2e.XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM
n=0
fails=0

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }

if [ ! -x "$BIN" ]; then
	echo "1..0 # skip $BIN not built"
	exit 0
fi

for f in "$DATA"/bad/*.yaml; do
	name=$(basename "$f")
	expect=$(head -n 1 "$f" | sed -n 's/^# expect: //p')
	if [ -z "$expect" ]; then
		not_ok "$name: no '# expect:' first line"
		continue
	fi
	timeout 10 "$BIN" validate "$f" >"$TMP/out" 2>"$TMP/err"
	rc=$?
	got=$(cat "$TMP/err")
	if [ "$rc" -eq 2 ] && [ "$got" = "$f:$expect" ] && [ ! -s "$TMP/out" ] &&
		[ "$(wc -l <"$TMP/err")" -eq 1 ]; then
		ok "$name: $expect"
	else
		not_ok "$name"
		echo "#   exit: $rc (want 2)"
		echo "#    got: $got"
		echo "#   want: $f:$expect"
	fi
done

for f in "$DATA"/good/*.yaml; do
	name=$(basename "$f")
	if timeout 10 "$BIN" validate "$f" >"$TMP/out" 2>"$TMP/err" && grep -q ': ok (' "$TMP/out" &&
		[ ! -s "$TMP/err" ]; then
		ok "good/$name validates"
	else
		not_ok "good/$name validates"
		sed 's/^/#   /' "$TMP/err"
	fi
done

d1=$("$BIN" validate "$DATA/good/full.yaml" | sed "s/.*digest //; s/)$//")
d2=$("$BIN" validate "$DATA/good/full-reformatted.yaml" | sed "s/.*digest //; s/)$//")
if [ -n "$d1" ] && [ "$d1" = "$d2" ]; then
	ok "reformatting does not change the digest ($d1)"
else
	not_ok "reformatting does not change the digest ($d1 vs $d2)"
fi

# Hostile inputs, made here: each must exit 2 with one positioned line, quickly.
hostile() { # name file expected-message-substring
	start=$(date +%s)
	timeout 10 "$BIN" validate "$2" >/dev/null 2>"$TMP/err"
	rc=$?
	took=$(($(date +%s) - start))
	if [ "$rc" -eq 2 ] && grep -q "^$2:[0-9]*:[0-9]*: .*$3" "$TMP/err" && [ "$took" -le 5 ]; then
		ok "$1 refused in ${took}s: $(cat "$TMP/err")"
	else
		not_ok "$1 (exit $rc, ${took}s)"
		sed 's/^/#   /' "$TMP/err" | cut -c1-300
	fi
}

{
	echo 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'
	for i in b c d e f g h i; do echo "$i: &$i [*a,*a,*a,*a,*a,*a,*a,*a,*a]"; done
} >"$TMP/bomb.yaml"
hostile "billion laughs" "$TMP/bomb.yaml" "anchors and aliases are not allowed"

awk 'BEGIN { s = ""; for (i = 0; i < 10000; i++) s = s "["; print "apiVersion: " s }' >"$TMP/deep.yaml"
hostile "10000-deep nesting" "$TMP/deep.yaml" "nested deeper than 32 levels"

awk 'BEGIN { print "apiVersion: nimfactory/v1"; for (i = 0; i < 50000; i++) print "# padding padding padding" }' \
	>"$TMP/big.yaml"
hostile "1 MiB+ file" "$TMP/big.yaml" "more than the limit of 1048576"

head -c 4096 /dev/urandom >"$TMP/random.yaml"
hostile "random bytes" "$TMP/random.yaml" ""

: >"$TMP/empty.yaml"
hostile "empty file" "$TMP/empty.yaml" "empty recipe"

timeout 10 "$BIN" validate "$TMP/does-not-exist.yaml" >/dev/null 2>"$TMP/err"
rc=$?
if [ "$rc" -eq 2 ] && grep -q "does-not-exist.yaml" "$TMP/err"; then
	ok "missing file exits 2"
else
	not_ok "missing file exits 2 (exit $rc)"
fi

echo "1..$n"
[ "$fails" -eq 0 ]
