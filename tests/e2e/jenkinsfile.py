#!/usr/bin/env python3
"""jenkinsfile.py - read a declarative Jenkinsfile structurally (no Jenkins here).

Usage: jenkinsfile.py JENKINSFILE

Tokenizes the Groovy (comments, single- and double-quoted strings with their
escapes, words, punctuation), nests `head { ... }` blocks, checks the
declarative shape pipeline { agent none; stages { stage(NAME) { parallel {
stage(NAME) { agent { label L } steps { sh S... } post { always { junit ...
testResults: R } } } ... } } ... } }, and prints, as JSON, for each top stage
the list of its parallel stages: {"compile": [{"name", "label", "sh", "junit"}], ...}.
Exits 1 with a message on anything else (unbalanced braces, an unterminated
string, a stage without an agent label, a top stage that is not parallel).
"""
import json
import re
import sys

TOKEN = re.compile(r"""
    (?P<ws>[ \t\r]+) | (?P<nl>\n) | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<sq>'(?:[^'\\\n]|\\.)*') | (?P<dq>"(?:[^"\\\n]|\\.)*")
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*) | (?P<punct>[{}():,])
""", re.X | re.S)


def fail(msg):
    print("jenkinsfile: " + msg, file=sys.stderr)
    sys.exit(1)


def unquote(tok):
    body = tok[1:-1]
    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)",
                  lambda m: chr(int(m.group(1)[1:], 16)) if len(m.group(1)) == 5
                  else {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def tokens(text):
    pos, out = 0, []
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            fail("cannot read %r at offset %d" % (text[pos:pos + 20], pos))
        pos = m.end()
        kind = m.lastgroup
        if kind in ("ws", "comment"):
            continue
        if kind in ("sq", "dq"):
            out.append(("str", unquote(m.group())))
        else:
            out.append((kind, m.group()))
    return out


def parse_block(toks, i, depth):
    """Statements until the matching '}': each a head (tokens) and, when it
    opens a block, its children."""
    items, head = [], []
    while i < len(toks):
        kind, val = toks[i]
        if kind == "nl":
            if head:
                items.append({"head": head, "children": None})
                head = []
        elif val == "{" and kind == "punct":
            children, i = parse_block(toks, i + 1, depth + 1)
            items.append({"head": head, "children": children})
            head = []
        elif val == "}" and kind == "punct":
            if depth == 0:
                fail("a '}' closes nothing")
            if head:
                items.append({"head": head, "children": None})
            return items, i
        else:
            head.append((kind, val))
        i += 1
    if depth:
        fail("a '{' is never closed")
    if head:
        items.append({"head": head, "children": None})
    return items, i


def named(items, word):
    return [it for it in items if it["head"] and it["head"][0] == ("word", word)]


def one(items, word, where):
    found = named(items, word)
    if len(found) != 1 or found[0]["children"] is None:
        fail("%s: expected one %s { } block, found %d" % (where, word, len(found)))
    return found[0]["children"]


def stage_name(item):
    h = item["head"]
    if len(h) != 4 or h[1] != ("punct", "(") or h[2][0] != "str" or h[3] != ("punct", ")"):
        fail("a stage without a quoted name: %r" % (h,))
    return h[2][1]


def leaf_stage(item):
    name = stage_name(item)
    body = item["children"]
    agent = one(body, "agent", name)
    labels = [it["head"] for it in agent if it["head"][:1] == [("word", "label")]]
    if len(labels) != 1 or len(labels[0]) != 2 or labels[0][1][0] != "str":
        fail("%s: agent { label '...' } expected" % name)
    steps = one(body, "steps", name)
    sh = [it["head"][1][1] for it in steps
          if len(it["head"]) == 2 and it["head"][0] == ("word", "sh") and it["head"][1][0] == "str"]
    if len(sh) != len(steps) or not sh:
        fail("%s: steps other than sh '...'" % name)
    always = one(one(body, "post", name), "always", name)
    junit = named(always, "junit")
    results = [h for j in junit for k, h in enumerate(j["head"])
               if h == ("word", "testResults") and k + 2 < len(j["head"])]
    if len(junit) != 1 or not results:
        fail("%s: post { always { junit ... testResults: '...' } } expected" % name)
    head = junit[0]["head"]
    path = head[head.index(("word", "testResults")) + 2]
    return {"name": name, "label": labels[0][1][1], "sh": sh, "junit": path[1]}


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        top, _ = parse_block(tokens(f.read()), 0, 0)
    top = [it for it in top if it["head"] or it["children"]]
    if len(top) != 1 or top[0]["head"] != [("word", "pipeline")]:
        fail("the file is not one pipeline { } block")
    pipeline = top[0]["children"]
    if [it["head"] for it in named(pipeline, "agent")] != [[("word", "agent"), ("word", "none")]]:
        fail("pipeline: agent none expected (each stage picks its agent)")
    out = {}
    for st in named(one(pipeline, "stages", "pipeline"), "stage"):
        name = stage_name(st)
        par = one(st["children"], "parallel", name)
        out[name] = [leaf_stage(it) for it in named(par, "stage")]
        if not out[name]:
            fail("%s: an empty parallel block" % name)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
