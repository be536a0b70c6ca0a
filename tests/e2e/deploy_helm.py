"""deploy_helm.py - the real Helm library (PyPI helm-sdkpy) and the Kubernetes
schemas (PyPI kubernetes-validate) for tests/e2e/deploy_helm.sh.

  deploy_helm.py lint CHART                 helm lint; exit 1 on a warning or error
  deploy_helm.py package CHART DEST         helm package; prints the .tgz path
  deploy_helm.py render CHART RELEASE OUT [VALUES.json]
                                            the objects Helm renders, as JSON (a list)
  deploy_helm.py validate OBJECTS.json      each object against the Kubernetes schemas
  deploy_helm.py k8s DIR OUT                the kustomize base's objects, as JSON (a list)
  deploy_helm.py compare A.json B.json      the same objects, Helm's own labels aside
  deploy_helm.py keys VALUES.yaml           the dotted key paths of a values file
  deploy_helm.py show REF DEST              helm show chart / values oci://REF (plain http),
                                            into DEST/Chart.yaml and DEST/values.yaml

helm-sdkpy has no `helm template`: render installs the chart (no waiting)
into a stand-in Kubernetes API on 127.0.0.1 that answers discovery, holds
no objects and accepts every create; what Helm rendered is the release's
manifest, exactly the text `helm template` prints.
"""
import asyncio
import json
import os
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

# Kubernetes version the objects must be valid for: the chart's kubeVersion
# floor is 1.23; 1.30 is a release every maintained cluster has passed.
K8S_VERSION = "1.30.0"

RESOURCES = {
    "v1": [("services", "Service", True), ("secrets", "Secret", True),
           ("persistentvolumeclaims", "PersistentVolumeClaim", True),
           ("namespaces", "Namespace", False)],
    "apps/v1": [("deployments", "Deployment", True)],
    "autoscaling/v2": [("horizontalpodautoscalers", "HorizontalPodAutoscaler", True)],
    "monitoring.coreos.com/v1": [("servicemonitors", "ServiceMonitor", True)],
}


class FakeKube(BaseHTTPRequestHandler):
    """Discovery, empty lists, 404 for every object, 201 for every create."""

    def log_message(self, *args):
        pass

    def reply(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def discovery(self, path):
        if path == "/version":
            return {"major": "1", "minor": "30", "gitVersion": "v1.30.0"}
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"]}
        if path == "/apis":
            groups = []
            for gv in RESOURCES:
                if "/" in gv:
                    g, v = gv.split("/")
                    ver = {"groupVersion": gv, "version": v}
                    groups.append({"name": g, "versions": [ver], "preferredVersion": ver})
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
        for gv, res in RESOURCES.items():
            if path == ("/api/v1" if gv == "v1" else "/apis/" + gv):
                return {"kind": "APIResourceList", "groupVersion": gv, "resources": [
                    {"name": n, "singularName": "", "namespaced": ns, "kind": k,
                     "verbs": ["get", "list", "create", "update", "patch", "delete"]}
                    for n, k, ns in res]}
        return None

    def do_GET(self):
        path = self.path.split("?")[0]
        found = self.discovery(path)
        if found is not None:
            return self.reply(200, found)
        if path.endswith("/secrets"):  # Helm's release storage: no releases yet
            return self.reply(200, {"kind": "SecretList", "apiVersion": "v1", "metadata": {}, "items": []})
        return self.reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                "reason": "NotFound", "code": 404})

    def echo(self, code):
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            obj = json.loads(raw or b"{}")
        except ValueError:  # Helm's release Secret goes as protobuf
            obj = {"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "release"}}
        self.reply(code, obj)

    def do_POST(self):
        self.echo(201)

    def do_PUT(self):
        self.echo(200)

    def do_PATCH(self):
        self.echo(200)


def helm():
    import helm_sdkpy
    return helm_sdkpy


def lint(chart):
    h = helm()
    res = asyncio.run(h.Lint(h.Configuration()).run(chart))
    bad = [m for m in res.get("Messages") or [] if m.get("Severity", 0) >= 2]
    for m in res.get("Messages") or []:
        print("# lint: severity %s %s %s" % (m.get("Severity"), m.get("Path"), m.get("Err")))
    return 1 if bad or res.get("Errors") else 0


def package(chart, dest):
    h = helm()
    print(asyncio.run(h.Package(h.Configuration()).run(chart, dest_dir=dest)))
    return 0


def render(chart, release, out, values_file=None):
    h = helm()
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeKube)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as kc:
            yaml.safe_dump({
                "apiVersion": "v1", "kind": "Config", "current-context": "c",
                "clusters": [{"name": "f", "cluster": {"server": "http://127.0.0.1:%d" % server.server_address[1]}}],
                "users": [{"name": "u", "user": {"token": "test"}}],
                "contexts": [{"name": "c", "context": {"cluster": "f", "user": "u", "namespace": "default"}}],
            }, kc)
            kc.flush()
            values = json.load(open(values_file)) if values_file else None
            rel = asyncio.run(h.Install(h.Configuration(kubeconfig=kc.name)).run(
                release, chart, values=values, wait=False, timeout=30))
    finally:
        server.shutdown()
    objs = [d for d in yaml.safe_load_all(rel["manifest"]) if d]
    json.dump(objs, open(out, "w"), indent=1, sort_keys=True)
    return 0


def validate(path):
    """Prints the kinds validated; a CRD's kind (ServiceMonitor) has no schema here."""
    import kubernetes_validate
    bad, kinds = 0, []
    for obj in json.load(open(path)):
        try:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
            kinds.append(obj["kind"])
        except kubernetes_validate.SchemaNotFoundError:
            print("# %s: no schema (a custom resource), not validated" % obj["kind"], file=sys.stderr)
        except kubernetes_validate.ValidationError as e:
            print("# %s %s: %s" % (obj.get("kind"), obj["metadata"].get("name"), str(e).splitlines()[0]),
                  file=sys.stderr)
            bad += 1
    print(" ".join(sorted(kinds)))
    return 1 if bad else 0


def k8s(folder, out):
    kust = yaml.safe_load(open(os.path.join(folder, "kustomization.yaml")))
    objs = [yaml.safe_load(open(os.path.join(folder, f))) for f in kust["resources"]]
    json.dump(objs, open(out, "w"), indent=1, sort_keys=True)
    return 0


def without_helm_labels(obj):
    """A copy without the labels only Helm adds (helm.sh/chart, managed-by)."""
    obj = json.loads(json.dumps(obj))
    for key in ("helm.sh/chart", "app.kubernetes.io/managed-by"):
        obj.get("metadata", {}).get("labels", {}).pop(key, None)
    return obj


def compare(a_path, b_path):
    a = {(o["kind"], o["metadata"]["name"]): without_helm_labels(o) for o in json.load(open(a_path))}
    b = {(o["kind"], o["metadata"]["name"]): without_helm_labels(o) for o in json.load(open(b_path))}
    if sorted(a) != sorted(b):
        print("# objects differ: %s against %s" % (sorted(a), sorted(b)))
        return 1
    bad = 0
    for key in sorted(a):
        if a[key] != b[key]:
            print("# %s %s differs:\n# %s\n# %s" % (key[0], key[1], json.dumps(a[key], sort_keys=True),
                                                   json.dumps(b[key], sort_keys=True)))
            bad += 1
    return 1 if bad else 0


def show(ref, dest):
    """Helm downloads the chart from the registry and loads it (helm-sdkpy's
    Pull crashes in its Go shim without a registry client; Show has one)."""
    h = helm()
    cfg = h.Configuration(plain_http=True)
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, "Chart.yaml"), "w") as f:
        f.write(asyncio.run(h.Show(cfg).chart("oci://" + ref)))
    with open(os.path.join(dest, "values.yaml"), "w") as f:
        f.write(asyncio.run(h.Show(cfg).values("oci://" + ref)))
    return 0


def key_paths(v, prefix):
    """Dotted paths of v's leaves; a list of mappings contributes its items' keys under []."""
    if isinstance(v, dict) and v:
        return sorted(k for key in v for k in key_paths(v[key], prefix + "." + key))
    if isinstance(v, list) and v and isinstance(v[0], dict):
        return sorted(set(k for item in v for k in key_paths(item, prefix + "[]")))
    return [prefix]


def keys(path):
    print(" ".join(key_paths(yaml.safe_load(open(path)), "")))
    return 0


COMMANDS = {"lint": lint, "package": package, "render": render, "validate": validate,
            "k8s": k8s, "compare": compare, "show": show, "keys": keys}

if __name__ == "__main__":
    sys.exit(COMMANDS[sys.argv[1]](*sys.argv[2:]))
