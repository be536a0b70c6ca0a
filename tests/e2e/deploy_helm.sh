#!/bin/sh
# deploy_helm.sh - the deployment templates of a real build (stories260K),
# checked with the real Helm library (PyPI helm-sdkpy) and the Kubernetes
# schemas (PyPI kubernetes-validate): OUT/helm is a complete chart for the
# image (its digest, its profiles) with the keys the shipped chart documents;
# Helm lints (every template rendered) and packages it; what Helm renders is
# valid and equals OUT/k8s's objects; the same holds for the template
# branches the build's values do not take (a GPU profile, HPA, PVC,
# ServiceMonitor: test_deploy's variants); `push --chart` puts it in the
# loopback docker-registry where Helm pulls it and skopeo reads the digest we
# printed.  The Helm work is in deploy_helm.py.
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
MODELS="${NF_SHARED:?}/models/stories260K"
SRC="${NF_SRC:?}"
W=$(mktemp -d /tmp/nf-e2e-deploy-XXXXXX)
. "$SRC/tests/tap.sh"
. "$SRC/tests/pyref.sh"
. "$SRC/tests/e2e/registry_lib.sh.inc"
trap 'reg_stop_all; rm -rf "$W"' EXIT INT TERM

pyref_python
if ! "$PY" -c 'import helm_sdkpy, kubernetes_validate, yaml' 2>/dev/null; then
	echo "1..0 # skip build/venv lacks helm_sdkpy or kubernetes_validate (ci/install-pydeps.sh)"
	exit 0
fi
H() { "$PY" "$SRC/tests/e2e/deploy_helm.py" "$@"; }
# yaml_get FILE PYTHON-EXPR: an expression over the parsed YAML `y`.
yaml_get() {
	"$PY" -c 'import yaml,sys; y=yaml.safe_load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

export NIMFACTORY_CACHE="$W/cache" NIMFACTORY_OFFLINE=1 DOCKER_CONFIG="$W/no-docker"
unset NIMFACTORY_REGISTRY_USER NIMFACTORY_REGISTRY_PASSWORD NIMFACTORY_CHART
"$NF" cache add "$MODELS/stories260K.bin" "$MODELS/tok512.bin" >/dev/null 2>&1
"$NF" build "$SRC/recipes/llama.yaml" --out "$W/out" >"$W/build.log" 2>&1
is "build exits 0" "$?" 0
O="$W/out"
t "the build's last line names the chart and the kustomize base" \
	grep -q "built .*Helm chart in helm/, kustomize base in k8s/" "$W/build.log"

# --- OUT/helm: the chart, with values for this image
DIGEST=$(json_get "$O/oci/index.json" "[m['digest'] for m in j['manifests'] if m['annotations']['org.opencontainers.image.ref.name']=='1.0.0'][0]")
is "values.yaml pins the image by the digest the build tagged" \
	"$(yaml_get "$O/helm/values.yaml" "y['image']['repository'] + '@' + y['image']['digest']")" \
	"nimfactory/stories260k@$DIGEST"
is "values.yaml lists every profile the build made" \
	"$(yaml_get "$O/helm/values.yaml" "' '.join(p['id'] for p in y['profiles'])")" \
	"$(json_get "$O/plan.json" "' '.join(p['id'] for p in j['profiles'])")"
is "each profile's memory covers twice its weights file" \
	"$(yaml_get "$O/helm/values.yaml" "all(p['memoryMiB'] * 2**20 >= 2 * __import__('os').path.getsize('$O/engines/%s/weights.safetensors' % p['id']) for p in y['profiles'])")" \
	True
is "values.yaml has exactly the keys the shipped chart documents" \
	"$(H keys "$O/helm/values.yaml")" "$(H keys "$SRC/templates/helm/nimserve/values.yaml")"
is "Chart.yaml: named after the model, versioned by the image tag" \
	"$(yaml_get "$O/helm/Chart.yaml" "y['name'] + ' ' + y['version'] + ' ' + y['appVersion']")" \
	"stories260k 1.0.0 1.0.0"
t "helm lint passes with no warning (every template rendered)" H lint "$O/helm"
t "helm package makes stories260k-1.0.0.tgz" H package "$O/helm" "$W"
t "  which is there" test -s "$W/stories260k-1.0.0.tgz"

# --- what Helm renders: valid, and the same objects as OUT/k8s
t "Helm renders the chart (install into a stand-in API server)" H render "$O/helm" stories260k "$W/helm.json"
is "Helm's objects are valid Kubernetes $(echo 1.30)" "$(H validate "$W/helm.json" 2>&1)" "Deployment Service"
t "OUT/k8s is a kustomize base of its files" H k8s "$O/k8s" "$W/k8s.json"
is "OUT/k8s's objects are valid Kubernetes" "$(H validate "$W/k8s.json" 2>&1)" "Deployment Service"
t "OUT/k8s's objects equal Helm's (image, env, probes, resources, volumes, Service)" \
	H compare "$W/helm.json" "$W/k8s.json"
is "the Deployment runs the default profile by id" \
	"$(json_get "$W/helm.json" "[e['value'] for o in j if o['kind']=='Deployment' for e in o['spec']['template']['spec']['containers'][0]['env'] if e['name']=='NIM_MODEL_PROFILE'][0]")" \
	"$(yaml_get "$O/helm/values.yaml" "[p['id'] for p in y['profiles'] if p['name']==y['defaultProfile']][0]")"

# --- the branches the build's values do not take, against the shipped chart
if [ "${NF_SAN:-}" = 1 ]; then
	# pure Helm work on test_deploy's output, which the sanitizer run of
	# test_deploy itself covers: not repeated in the slower CI pass
	skip "sanitizer build: the variants are rendered in the plain run"
elif [ -x "$NF_BUILD/tests/factory/test_deploy" ]; then
	mkdir -p "$W/variants"
	NF_DEPLOY_OUT="$W/variants" "$NF_BUILD/tests/factory/test_deploy" >/dev/null 2>&1
	for v in default variant; do
		t "$v values: Helm renders the shipped chart" \
			H render "$SRC/templates/helm/nimserve" prod "$W/variants/$v.helm.json" "$W/variants/$v.values.json"
		t "$v values: our objects equal Helm's" H compare "$W/variants/$v.helm.json" "$W/variants/$v.objects.json"
	done
	is "variant values: Helm's objects are valid (a ServiceMonitor is a custom resource)" \
		"$(H validate "$W/variants/variant.helm.json" 2>/dev/null)" \
		"Deployment HorizontalPodAutoscaler PersistentVolumeClaim Service"
else
	skip "build/tests/factory/test_deploy not built (make test-bins)"
fi

# --- push --chart to the loopback registry, pull back
if ! command -v docker-registry >/dev/null 2>&1 || ! command -v skopeo >/dev/null 2>&1; then
	skip "docker-registry or skopeo missing"
	finish
	exit $?
fi
reg_start R || { echo "Bail out! docker-registry did not start"; exit 1; }
"$NF" push --chart "$O/helm" "127.0.0.1:$R_PORT/charts" --insecure >"$W/push.out" 2>"$W/push.err"
is "push --chart exits 0" "$?" 0
PUSHED=$(sed -n 's/^pushed chart .*@//p' "$W/push.out")
t "it pushed to NAMESPACE/NAME:VERSION, where helm push would" \
	grep -q "^pushed chart 127.0.0.1:$R_PORT/charts/stories260k:1.0.0@sha256:" "$W/push.out"
skopeo inspect --tls-verify=false --raw "docker://127.0.0.1:$R_PORT/charts/stories260k:1.0.0" >"$W/manifest.json" 2>"$W/skopeo.err"
is "skopeo reads the manifest back by the chart version" "$?" 0
is "its digest is the one push printed" "sha256:$(sha256sum "$W/manifest.json" | cut -d' ' -f1)" "$PUSHED"
is "with Helm's media types" \
	"$(json_get "$W/manifest.json" "j['config']['mediaType'] + ' ' + j['layers'][0]['mediaType']")" \
	"application/vnd.cncf.helm.config.v1+json application/vnd.cncf.helm.chart.content.v1.tar+gzip"
t "helm show fetches the chart from the registry and loads it" \
	H show "127.0.0.1:$R_PORT/charts/stories260k" "$W/shown"
is "  its Chart.yaml is the build's" "$(yaml_get "$W/shown/Chart.yaml" "(y['name'], y['version'])")" \
	"('stories260k', '1.0.0')"
is "  its values are the build's" "$(yaml_get "$W/shown/values.yaml" y)" "$(yaml_get "$O/helm/values.yaml" y)"
LAYER=$(json_get "$W/manifest.json" "j['layers'][0]['digest']")
mkdir -p "$W/layer"
curl -sf "http://127.0.0.1:$R_PORT/v2/charts/stories260k/blobs/$LAYER" -o "$W/chart.tgz"
is "the layer comes back with its digest" "sha256:$(sha256sum "$W/chart.tgz" | cut -d' ' -f1)" "$LAYER"
is "  a tar whose first entry is Chart.yaml" "$(tar tzf "$W/chart.tgz" | head -1)" "stories260k/Chart.yaml"
tar xzf "$W/chart.tgz" -C "$W/layer"
t "  holding every file of OUT/helm, unchanged" diff -r "$W/layer/stories260k" "$O/helm"
"$NF" push --chart "$O/helm" "127.0.0.1:$R_PORT/charts" --insecure >"$W/push2.out" 2>&1
is "a second push gives the same digest" "$(sed -n 's/^pushed chart .*@//p' "$W/push2.out")" "$PUSHED"
"$NF" push --chart "$O/helm" "127.0.0.1:$R_PORT/charts:2.0.0" --insecure >/dev/null 2>"$W/push3.err"
is "a tag in REF is refused (the tag is the chart version): exit 2" "$?" 2
finish
