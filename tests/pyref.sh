# pyref.sh - sourced by tests that compare with a Python reference library
# (Hugging Face tokenizers, jinja2, gguf-py, numpy, the openai client).  pyref_python sets PY to
# the venv's python, creating build/venv through ci/install-pydeps.sh when it
# is missing; it prints a TAP skip plan and exits 0 when that is impossible
# (no PyPI), so such a test reports itself skipped, never passed.
pyref_python() {
	PY="${NF_SRC:?}/build/venv/bin/python"
	if ! "$PY" -c 'import tokenizers, jinja2, gguf, numpy, openai' 2>/dev/null; then
		if ! sh "$NF_SRC/ci/install-pydeps.sh" >&2; then
			echo "1..0 # skip the Python reference libraries cannot be installed here"
			exit 0
		fi
	fi
}
