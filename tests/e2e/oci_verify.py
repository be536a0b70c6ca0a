#!/usr/bin/env python3
"""oci_verify.py OUT [CACHE [--tmp-empty]] - exit 0 when OUT is a whole build output and the
cache's stages are whole, else print what is wrong and exit 1.

OUT: plan.json and model_manifest.yaml are there, and every blob its OCI
layout reaches from index.json (manifests, indexes, configs, layers, subjects
of artifacts) exists with the size and sha256 its descriptor gives.
CACHE: every stage holding an engine has the files its config.json lists,
with their sha256 (the blobs are checked by `nimfactory cache verify`);
with --tmp-empty, its tmp/ holds nothing (a finished build swept it).
"""
import hashlib
import json
import os
import sys


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check_layout(oci, errors):
    with open(os.path.join(oci, "oci-layout")) as f:
        if json.load(f).get("imageLayoutVersion") != "1.0.0":
            errors.append("oci-layout: not 1.0.0")
    with open(os.path.join(oci, "index.json")) as f:
        todo = list(json.load(f)["manifests"])
    seen = set()
    while todo:
        d = todo.pop()
        if d["digest"] in seen:
            continue
        seen.add(d["digest"])
        path = os.path.join(oci, "blobs", "sha256", d["digest"].split(":", 1)[1])
        if not os.path.isfile(path):
            errors.append("%s: missing" % d["digest"])
            continue
        if os.path.getsize(path) != d["size"] or "sha256:" + sha256_file(path) != d["digest"]:
            errors.append("%s: size or digest differs from its descriptor" % d["digest"])
            continue
        if d.get("mediaType", "").endswith(("manifest.v1+json", "index.v1+json")):
            with open(path) as f:
                m = json.load(f)
            todo += m.get("manifests", []) + m.get("layers", [])
            todo += [m[k] for k in ("config", "subject") if k in m]


def check_cache(cache, tmp_empty, errors):
    stages = os.path.join(cache, "stages")
    for key in sorted(os.listdir(stages)):
        # every stage result is whole: its stage.json, and for a compile its engine
        if not os.path.isfile(os.path.join(stages, key, "stage.json")):
            errors.append("stage %s: no stage.json" % key[:12])
        if not os.path.isdir(os.path.join(stages, key, "engine")):
            if os.path.isdir(os.path.join(stages, key, "oci")):
                check_layout(os.path.join(stages, key, "oci"), errors)
            continue
        cfg = os.path.join(stages, key, "engine", "config.json")
        if not os.path.isfile(cfg):
            errors.append("stage %s: no engine/config.json" % key[:12])
            continue
        with open(cfg) as f:
            files = json.load(f)["files"]
        for name, v in files.items():
            p = os.path.join(stages, key, "engine", name)
            if not os.path.isfile(p) or sha256_file(p) != v["sha256"]:
                errors.append("stage %s: %s does not match its config.json" % (key[:12], name))
    left = os.listdir(os.path.join(cache, "tmp"))
    if tmp_empty and left:
        errors.append("cache tmp/ holds %s" % ", ".join(sorted(left)))


def main():
    errors = []
    out = sys.argv[1]
    for name in ("plan.json", "model_manifest.yaml", "oci/index.json"):
        if not os.path.isfile(os.path.join(out, name)):
            errors.append("%s: no %s" % (out, name))
    if not errors:
        check_layout(os.path.join(out, "oci"), errors)
    if len(sys.argv) > 2:
        check_cache(sys.argv[2], "--tmp-empty" in sys.argv[3:], errors)
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
