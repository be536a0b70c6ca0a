"""report_check.py - validate the build reports (factory/report*.c) with the
parsers their readers use, so a report that only looks right fails here.

  report_check.py json FILE            gates.json against docs/schemas/gates.schema.json (jsonschema)
  report_check.py junit FILE           junit.xml against tests/data/junit/junit.xsd (xmlschema)
  report_check.py svg FILE [POINTS]    chart.svg: well-formed XML, SVG 1.1 root, no script or
                                       external reference, POINTS plotted profiles when given
  report_check.py md FILE [ROWS]       summary.md: one table whose rows all have the header's
                                       column count, ROWS profile rows when given

Exit 0 when valid; otherwise 1 with one line per problem on stderr.
"""
import json
import os
import sys
import xml.etree.ElementTree as ET

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SVG = "{http://www.w3.org/2000/svg}"


def fail(msg):
    print("report_check: " + msg, file=sys.stderr)
    sys.exit(1)


def check_json(path):
    import jsonschema
    with open(os.path.join(SRC, "docs/schemas/gates.schema.json")) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    with open(path) as f:
        doc = json.load(f)
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=lambda e: list(e.path))
    for e in errors[:8]:
        print("report_check: %s: at /%s: %s" % (path, "/".join(str(p) for p in e.path), e.message[:200]),
              file=sys.stderr)
    if errors:
        sys.exit(1)


def check_junit(path):
    import xmlschema
    schema = xmlschema.XMLSchema(os.path.join(SRC, "tests/data/junit/junit.xsd"))
    errors = list(schema.iter_errors(path))
    for e in errors[:8]:
        print("report_check: %s: %s: %s" % (path, e.path, e.reason), file=sys.stderr)
    if errors:
        sys.exit(1)
    # The counts a CI reader shows must be the counts of the elements.
    root = ET.parse(path).getroot()
    for suite in root.iter("testsuite"):
        cases = suite.findall("testcase")
        got = {"tests": len(cases),
               "failures": sum(1 for c in cases if c.find("failure") is not None),
               "errors": sum(1 for c in cases if c.find("error") is not None),
               "skipped": sum(1 for c in cases if c.find("skipped") is not None)}
        for key, n in got.items():
            if int(suite.get(key, "0")) != n:
                fail("%s: testsuite %r says %s=%s, has %d" % (path, suite.get("name"), key, suite.get(key), n))


def check_svg(path, points):
    root = ET.parse(path).getroot()
    if root.tag != SVG + "svg" or root.get("version") != "1.1":
        fail("%s: root is %s version %s, not an SVG 1.1 <svg>" % (path, root.tag, root.get("version")))
    for el in root.iter():
        tag = el.tag.replace(SVG, "")
        if tag in ("script", "foreignObject", "image", "style") or tag.startswith("{"):
            fail("%s: <%s> is not allowed in a self-contained chart" % (path, tag))
        for k, v in el.attrib.items():
            if k.startswith("on") or "href" in k or "url(" in v:
                fail("%s: <%s %s=%r>: no scripts or external references" % (path, tag, k, v))
    n = sum(1 for el in root.iter(SVG + "circle") if el.get("class") == "point")
    if points is not None and n != points:
        fail("%s: %d points, expected %d" % (path, n, points))


def check_md(path, rows):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    table = [l for l in lines if l.startswith("|")]
    if len(table) < 2:
        fail("%s: no table" % path)

    def cells(line):  # split on | not escaped by a backslash
        out, cur, i = [], "", 1
        while i < len(line):
            if line[i] == "\\" and i + 1 < len(line):
                cur += line[i:i + 2]
                i += 2
                continue
            if line[i] == "|":
                out.append(cur)
                cur = ""
            else:
                cur += line[i]
            i += 1
        return out

    width = len(cells(table[0]))
    for l in table:
        if len(cells(l)) != width:
            fail("%s: row has %d cells, header %d: %s" % (path, len(cells(l)), width, l))
    if not all(c.strip().strip(":").strip("-") == "" for c in cells(table[1])):
        fail("%s: second table line is not the delimiter row" % path)
    if rows is not None and len(table) - 2 != rows:
        fail("%s: %d profile rows, expected %d" % (path, len(table) - 2, rows))


def main(argv):
    if len(argv) < 3:
        fail("usage: report_check.py json|junit|svg|md FILE [COUNT]")
    kind, path = argv[1], argv[2]
    count = int(argv[3]) if len(argv) > 3 else None
    checks = {"json": lambda: check_json(path), "junit": lambda: check_junit(path),
              "svg": lambda: check_svg(path, count), "md": lambda: check_md(path, count)}
    if kind not in checks:
        fail("unknown kind %r" % kind)
    checks[kind]()


if __name__ == "__main__":
    main(sys.argv)
