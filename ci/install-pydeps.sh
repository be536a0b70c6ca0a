#!/bin/sh
# Create build/venv with the Python reference libraries of the tests
# (tests/requirements.txt), once: a venv that already imports them is kept.
# Exit 4 when PyPI cannot be reached (the tests that need it then skip).
set -eu
cd "$(dirname "$0")/.."
VENV=build/venv
mkdir -p build
exec 9>build/venv.lock
flock 9
if "$VENV/bin/python" -c 'import tokenizers, jinja2, gguf, numpy, jsonschema, xmlschema, openai, ml_dtypes, kubernetes_validate, helm_sdkpy, check_jsonschema, yaml' 2>/dev/null; then
	exit 0
fi
rm -rf "$VENV"
python3 -m venv "$VENV" || { echo "install-pydeps: python3 -m venv failed" >&2; exit 4; }
if ! timeout 600 "$VENV/bin/pip" install -q -r tests/requirements.txt; then
	echo "install-pydeps: pip could not install tests/requirements.txt" >&2
	rm -rf "$VENV"
	exit 4
fi
# helm-sdkpy (the Helm library, for tests/e2e/deploy_helm.sh) declares a newer
# Python than it needs; on its own line so the flag covers it alone.
if ! timeout 600 "$VENV/bin/pip" install -q --ignore-requires-python helm-sdkpy==0.1.32; then
	echo "install-pydeps: pip could not install helm-sdkpy" >&2
	rm -rf "$VENV"
	exit 4
fi
