#!/bin/sh
# pipeline.sh - `nimfactory plan RECIPE... --emit gitlab|jenkins|json`: the
# GitLab child pipeline validates against GitLab's CI schema
# (check-jsonschema's vendor.gitlab-ci) and has one job per profile with its
# runner tag and a package job that needs them; the Jenkinsfile, read
# structurally (tests/e2e/jenkinsfile.py), has one parallel stage per profile
# with its agent label and junit step; the JSON validates against
# docs/schemas/pipeline.schema.json.  Then the pipeline is run here, job by
# job, each job with a cache of its own (separate runners) and a loopback
# docker-registry as the remote cache: the package job compiles nothing,
# pulls every engine and pushes the image.
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
MODELS="${NF_SHARED:?}/models/stories260K"
SRC="${NF_SRC:?}"
PY="$SRC/build/venv/bin/python"
W=$(mktemp -d /tmp/nf-e2e-pipeline-XXXXXX)
. "$SRC/tests/tap.sh"
. "$SRC/tests/e2e/registry_lib.sh.inc"
trap 'reg_stop_all; rm -rf "$W"' EXIT INT TERM

# Two recipes, as a repository would hold them (paths relative to the checkout).
mkdir -p "$W/repo/recipes"
sed 's/autotune: true/autotune: false/' "$SRC/recipes/llama.yaml" >"$W/repo/recipes/stories.yaml"
sed 's/autotune: true/autotune: false/; s/^  name: stories260k$/  name: stories-b/' \
	"$SRC/recipes/llama.yaml" >"$W/repo/recipes/stories b.yaml"
cd "$W/repo" || exit 1
RECIPES="recipes/stories.yaml"
PROFILES="cpu-fp32-tp1 cpu-int8-wo-tp1"

"$NF" plan recipes/stories.yaml "recipes/stories b.yaml" --emit gitlab --output "$W/child.yml"
is "plan --emit gitlab --output exits 0" "$?" 0
"$NF" plan recipes/stories.yaml "recipes/stories b.yaml" --emit gitlab >"$W/child-stdout.yml"
t "--output writes what stdout gets" cmp "$W/child.yml" "$W/child-stdout.yml"
"$NF" plan recipes/stories.yaml "recipes/stories b.yaml" --emit jenkins >"$W/Jenkinsfile"
is "plan --emit jenkins exits 0" "$?" 0
"$NF" plan recipes/stories.yaml "recipes/stories b.yaml" --emit json >"$W/graph.json"
is "plan --emit json exits 0" "$?" 0
"$NF" plan recipes/stories.yaml --emit circleci >/dev/null 2>"$W/bad.err"
is "an unknown --emit format exits 2" "$?" 2

# --- GitLab
if "$PY" -c 'import check_jsonschema, yaml' 2>/dev/null; then
	t "the child pipeline validates against GitLab's CI schema" \
		"$SRC/build/venv/bin/check-jsonschema" --builtin-schema vendor.gitlab-ci "$W/child.yml"
	sed 's/^  needs: \[\]$/  needs: 5/' "$W/child.yml" >"$W/broken.yml"
	"$SRC/build/venv/bin/check-jsonschema" --builtin-schema vendor.gitlab-ci "$W/broken.yml" >/dev/null 2>&1
	is "the schema check catches a broken child pipeline (needs: 5)" "$?" 1
	is "gitlab: one job per profile of each recipe, with its runner tag; package jobs need them" \
		"$("$PY" -c '
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
jobs = {k: v for k, v in d.items() if isinstance(v, dict) and "script" in v}
for name in sorted(jobs):
    j = jobs[name]
    needs = ",".join(n["job"] for n in j["needs"])
    print("%s|%s|%s|%s|%s" % (name, j["stage"], ",".join(j["tags"]), needs, j["artifacts"]["reports"]["junit"]))
' "$W/child.yml")" \
		"$(printf '%s\n' \
			"compile stories-b cpu-fp32-tp1|compile|cpu||out/stories-b/cpu-fp32-tp1/reports/junit.xml" \
			"compile stories-b cpu-int8-wo-tp1|compile|cpu||out/stories-b/cpu-int8-wo-tp1/reports/junit.xml" \
			"compile stories260k cpu-fp32-tp1|compile|cpu||out/stories260k/cpu-fp32-tp1/reports/junit.xml" \
			"compile stories260k cpu-int8-wo-tp1|compile|cpu||out/stories260k/cpu-int8-wo-tp1/reports/junit.xml" \
			"package stories-b|package|cpu|compile stories-b cpu-fp32-tp1,compile stories-b cpu-int8-wo-tp1|out/stories-b/image/reports/junit.xml" \
			"package stories260k|package|cpu|compile stories260k cpu-fp32-tp1,compile stories260k cpu-int8-wo-tp1|out/stories260k/image/reports/junit.xml")"
	is "gitlab: the recipe path with a space reaches the shell as one word" \
		"$("$PY" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["package stories-b"]["script"][0])' "$W/child.yml")" \
		"nimfactory build 'recipes/stories b.yaml' --out out/stories-b/image --cache-from \"\$NIMFACTORY_REMOTE_CACHE\""
	# ci/.gitlab-ci.yml, the parent a team adopts: valid, and its plan job's commands work
	t "ci/.gitlab-ci.yml validates against GitLab's CI schema" \
		"$SRC/build/venv/bin/check-jsonschema" --builtin-schema vendor.gitlab-ci "$SRC/ci/.gitlab-ci.yml"
	"$PY" -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); print("\n".join(d["plan"]["script"]))' \
		"$SRC/ci/.gitlab-ci.yml" >"$W/plan-job.sh"
	PATH="$NF_BUILD/bin:$PATH" NIMFACTORY_RECIPES="recipes/*.yaml" sh -e "$W/plan-job.sh" >"$W/plan-job.log" 2>&1
	is "ci/.gitlab-ci.yml's plan job runs" "$?" 0
	"$NF" plan recipes/*.yaml --emit gitlab >"$W/child-glob.yml"
	t "and its child pipeline is the one plan --emit gitlab writes" cmp nimfactory-pipeline.yml "$W/child-glob.yml"
else
	skip "check-jsonschema or PyYAML is not in build/venv"
	skip "(gitlab schema)"
	skip "(gitlab jobs)"
	skip "(gitlab quoting)"
	skip "(ci/.gitlab-ci.yml)"
	skip "(ci/.gitlab-ci.yml plan job)"
	skip "(ci/.gitlab-ci.yml child pipeline)"
fi

# --- Jenkins
python3 "$SRC/tests/e2e/jenkinsfile.py" "$W/Jenkinsfile" >"$W/jenkins.json" 2>"$W/jenkins.err"
is "the Jenkinsfile reads as a declarative pipeline" "$?" 0
is "jenkins: a parallel compile stage per profile, labelled, with its junit report; a package stage per recipe" \
	"$(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
for top in sorted(j):
    for s in j[top]:
        print("%s|%s|%s|%d|%s" % (top, s["name"], s["label"], len(s["sh"]), s["junit"]))
' "$W/jenkins.json")" \
	"$(printf '%s\n' \
		"compile|compile stories260k cpu-fp32-tp1|cpu|1|out/stories260k/cpu-fp32-tp1/reports/junit.xml" \
		"compile|compile stories260k cpu-int8-wo-tp1|cpu|1|out/stories260k/cpu-int8-wo-tp1/reports/junit.xml" \
		"compile|compile stories-b cpu-fp32-tp1|cpu|1|out/stories-b/cpu-fp32-tp1/reports/junit.xml" \
		"compile|compile stories-b cpu-int8-wo-tp1|cpu|1|out/stories-b/cpu-int8-wo-tp1/reports/junit.xml" \
		"package|package stories260k|cpu|2|out/stories260k/image/reports/junit.xml" \
		"package|package stories-b|cpu|2|out/stories-b/image/reports/junit.xml")"
is "jenkins: the sh steps are the graph's script lines" \
	"$(python3 -c 'import json,sys; print([s["sh"] for t in ("compile","package") for s in json.load(open(sys.argv[1]))[t]])' "$W/jenkins.json")" \
	"$(python3 -c 'import json,sys; print([j["script"] for k in ("compile","package") for j in json.load(open(sys.argv[1]))["jobs"] if j["kind"]==k])' "$W/graph.json")"

# --- JSON
if "$PY" -c 'import jsonschema' 2>/dev/null; then
	t "the JSON graph validates against docs/schemas/pipeline.schema.json" "$PY" -c '
import json, sys, jsonschema
s = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(s)
jsonschema.validate(json.load(open(sys.argv[2])), s, cls=jsonschema.Draft202012Validator)
' "$SRC/docs/schemas/pipeline.schema.json" "$W/graph.json"
else
	skip "jsonschema is not in build/venv"
fi

# --- run the pipeline here: each job on a runner (a cache) of its own
if ! command -v docker-registry >/dev/null 2>&1; then
	skip "docker-registry missing: the pipeline is not run"
	finish
	exit $?
fi
reg_start R || { echo "Bail out! docker-registry did not start"; exit 1; }
"$NF" plan $RECIPES --emit json --insecure >"$W/run.json"
export NIMFACTORY_REMOTE_CACHE="127.0.0.1:$R_PORT/ci/cache" NIMFACTORY_REGISTRY="127.0.0.1:$R_PORT"
export NIMFACTORY_OFFLINE=1 DOCKER_CONFIG="$W/no-docker" PATH="$NF_BUILD/bin:$PATH"
unset NIMFACTORY_REGISTRY_USER NIMFACTORY_REGISTRY_PASSWORD
# run_jobs KIND: every job of that kind, each with its own empty cache; the status of the last failure
run_jobs() {
	_rc=0
	"$PY" -c 'import json,sys; [print(i) for i, j in enumerate(json.load(open(sys.argv[1]))["jobs"]) if j["kind"] == sys.argv[2]]' "$W/run.json" "$1" >"$W/ids"
	while read -r _i; do
		export NIMFACTORY_CACHE="$W/runner-$_i"
		"$NF" cache add "$MODELS/stories260K.bin" "$MODELS/tok512.bin" >/dev/null 2>&1
		python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["jobs"][int(sys.argv[2])]["script"]))' "$W/run.json" "$_i" >"$W/job-$_i.sh"
		sh -e "$W/job-$_i.sh" >"$W/job-$_i.log" 2>&1 || _rc=$?
	done <"$W/ids"
	return $_rc
}
run_jobs compile
is "the compile jobs succeed" "$?" 0
run_jobs package
is "the package job succeeds" "$?" 0
PKG=$(cat "$W/ids")
is "the package job compiled nothing" "$(grep -c 'compile: .*quantize' "$W/job-$PKG.log")" 0
# the compile jobs pushed the convert stage, both engines and both profiles' gate results
t "the package job pulled the stages the compile jobs pushed" grep -q "from $NIMFACTORY_REMOTE_CACHE: 5 pulled, 0 missing, 0 refused" "$W/job-$PKG.log"
is "the package job ran no gate" "$(grep -c 'float32 reference' "$W/job-$PKG.log")" 0
t "the package job pushed the image" grep -q "^pushed 127.0.0.1:$R_PORT/nimfactory/stories260k:1.0.0@sha256:" "$W/job-$PKG.log"
for p in $PROFILES; do
	t "the $p job left its JUnit gate report where the pipeline attaches it" test -s "out/stories260k/$p/reports/junit.xml"
done
finish
