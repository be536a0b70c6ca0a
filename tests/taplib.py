"""taplib.py - TAP for the Python halves of the end-to-end scripts.

t(cond, name, extra) prints one test line, numbered on from NF_TAP_FROM (the
tests the shell part already printed); done(path) writes "COUNT FAILS" for
the shell part to read back (serve_lib.sh's serve_py_finish); client(port)
is the official openai client against a server on 127.0.0.1.
"""
import os

n = int(os.environ.get("NF_TAP_FROM", "0"))
fails = 0


def t(cond, name, extra=""):
    global n, fails
    n += 1
    print(("ok" if cond else "not ok") + f" {n} - {name}", flush=True)
    if not cond:
        fails += 1
        print("# " + str(extra)[:600].replace("\n", "\n# "), flush=True)


def done(path):
    with open(path, "w") as f:
        f.write(f"{n} {fails}\n")


def client(port, timeout=120):
    import openai
    return openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", timeout=timeout,
                         max_retries=0)
