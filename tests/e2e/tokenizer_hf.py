# tokenizer_hf.py - the Python half of tokenizer_hf.sh: builds Hugging Face
# tokenizers from the real vocabularies (SmolLM2's GGUF, stories260K's
# tok512.bin), saves each as tokenizer.json + tokenizer_config.json, and
# holds `nimfactory tokenize/detokenize` to HF's ids and text on a corpus of
# hard strings.  Prints TAP lines (the plan is printed by the caller).
import json
import os
import struct
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import gguf
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

NF = os.path.join(os.environ["NF_BUILD"], "bin", "nimfactory")
SHARED = os.environ["NF_SHARED"]
WORK = sys.argv[1]
N = 0


def tap(ok, name, diag=None):
    global N
    N += 1
    print(("ok %d - %s" if ok else "not ok %d - %s") % (N, name))
    if not ok and diag:
        for line in str(diag).splitlines()[:12]:
            print("# " + line)
    sys.stdout.flush()


# The families' splits, as their tokenizer.json files spell them.
RE_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
             r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
RE_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
            r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = [
    "",
    "Hello world",
    "The year 2024 had 365 days; pi is 3.14159265358979 and 1234567890123.",
    "I'm sure you'll see they've done it, we'd go, she's here, it's 'quoted' and I'LL SHOUT",
    "   leading spaces and trailing spaces   ",
    "many     spaces\t\ttabs\tand\nnewlines\n\n\nthree",
    "windows\r\nline\r\nendings\r\n",
    " ",
    "\n",
    "\t \n \t",
    "emoji \U0001F600 \U0001F44D\U0001F3FD skin \U0001F469\u200D\U0001F4BB zwj "
    "\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466 family",
    "flags \U0001F1EB\U0001F1F7\U0001F1EF\U0001F1F5 \U0001F3F4\u200D\u2620\uFE0F",
    "\u4e2d\u6587\u5b57\u7b26\u6d4b\u8bd5\uff0c\u65e5\u672c\u8a9e\u306e\u30c6\u30b9\u30c8\u3002\ud55c\uad6d\uc5b4",
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0645\u0646 \u0627\u0644\u064a\u0645\u064a\u0646",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c5ngstr\u00f6m e\u0301 combining \u00df \u0130stanbul",
    "def f(x):\n    if x > 0:\n        return x ** 2  # square\n    return -x\n",
    "for (int i = 0; i < n; i++) {\n\tsum += a[i];\n}",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "text<|endoftext|>more<|im_end|>",
    "<|im_start|><|im_start|>",
    "<|im_start",
    "\ufeffBOM \ufffd replacement \uffff nonchar \u00ff\u00fe \U0010FFFD end",
    "MiXeD CaSe WORDS and ALLCAPS123abc",
    "punctuation!!! ??? ... --- *** ((( ))) \"\" '' ``",
    "\u00a0nbsp\u2003em space\u3000ideographic\u2028line sep",
    "x" * 300 + " " + "ab" * 200,
    "1" * 40 + " " + "9" * 7,
    "'s's't 're've'm'll'd",
]
# What our binary is run on, one process per string and form: under the
# sanitizers (NF_SAN=1, each run ~10x slower) every other string, which
# still reaches every kind of text above.
CHECKED = CORPUS[::2] if os.environ.get("NF_SAN") == "1" else CORPUS

# Our binary runs once per string and form, each run independent of the
# others: they run side by side (the machine's cores, at least two), and
# their results are compared in corpus order, so the output is the same.
POOL = ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2)))


def each(fn, items):
    """fn over items, concurrently, results in items' order."""
    return list(POOL.map(fn, items))


# Text whose normalized forms differ: decomposed accents (e + U+0301), Hangul
# as conjoining jamo, compatibility characters (ligatures, circled digits,
# full-width letters, superscripts, Roman numerals), case (for Lowercase).
NORM_CORPUS = [
    "cafe\u0301 re\u0301sume\u0301 na\u0131\u0308ve A\u030angstro\u0308m",
    "\u1112\u1161\u11ab\u1100\u116e\u11a8\u110b\u1165 \ud55c\uad6d\uc5b4",
    "\ufb01nal \ufb02ow \u2460\u2461\u2462 \uff28\uff45\uff4c\uff4c\uff4f\uff01 "
    "x\u00b2 \u2167 \u3392",
    "\u0130stanbul \u03a3\u039f\u03a6\u0399\u0391\u03a3 MIXED Case \u00c9COLE",
    "  \u00a0padded\u3000 ",
    "Q\u0323\u0307 o\u0307\u0323 \u1e0b\u0323 \u212b \u2126",
]

# Added tokens as Phi-3 and Llama-2-derived tokenizers mark them: rstrip on
# the chat markers, lstrip on a mask, single_word on a user token.
FLAGGED = [("<|user|>", dict(rstrip=True, special=True)),
           ("<|assistant|>", dict(rstrip=True, special=True)),
           ("<|end|>", dict(rstrip=True, special=True)),
           ("<mask>", dict(lstrip=True, special=True)),
           ("<both>", dict(lstrip=True, rstrip=True, special=True)),
           ("sep", dict(single_word=True, special=False))]
FLAG_CORPUS = [
    "<|user|>\nhello there<|end|>\n<|assistant|>  sure  <|end|>",
    "<|user|>   \t\n  x<|end|><|end|>   ",
    "fill <mask> and   <mask>x<mask>  \u00a0<mask>",
    "a <both> b\t<both>\n\nc<both><both>   ",
    "sep a sep b-sep-c asep sepb _sep sep_ 1sep sep\u0301 sep",
    "<mask><mask> <|user|><mask> <both>sep<both> sep<|end|>",
]


def gguf_vocab():
    path = os.path.join(SHARED, "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
    r = gguf.GGUFReader(path)

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    f = r.fields["tokenizer.ggml.token_type"]
    types = [int(f.parts[i][0]) for i in f.data]
    f = r.fields["tokenizer.chat_template"]
    template = bytes(f.parts[f.data[0]]).decode("utf-8")
    return strings("tokenizer.ggml.tokens"), strings("tokenizer.ggml.merges"), types, template


def trained_vocab():
    """A small byte-level BPE trained here with GPT-2's split, so that digits,
    spaces and newlines merge: SmolLM2's vocabulary never merges digits, which
    hides the differences between the families' digit rules."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=900, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    text = CORPUS + ["%d %d.%d %d,%d" % (i * 7919, i, i * 13, i * 101, i) for i in range(400)]
    tok.train_from_iterator(text * 3, trainer)
    model = json.loads(tok.to_str())["model"]
    inv = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in inv] + ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, merges, [1] * len(inv) + [3, 3, 3]


def byte_level(name, tokens, merges, types, template):
    vocab = {t: i for i, t in enumerate(tokens)}
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tok = Tokenizer(models.BPE(vocab, pairs))
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if name == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    elif name == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        regex = RE_LLAMA3 if name == "llama3" else RE_QWEN2
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False), bl])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == 3])
    cfg = {"bos_token": tokens[1], "eos_token": tokens[2], "add_bos_token": False,
           "chat_template": template}
    return tok, cfg


def llama2c_vocab():
    with open(os.path.join(SHARED, "models/stories260K/tok512.bin"), "rb") as f:
        data = f.read()
    off, toks, scores = 4, [], []
    while off < len(data):
        score, n = struct.unpack_from("<fi", data, off)
        toks.append(data[off + 8:off + 8 + n].decode("utf-8"))
        scores.append(score)
        off += 8 + n
    return toks, scores


def sentencepiece():
    """tok512 as Llama 2's tokenizer.json spells it: spaces as U+2581, merges
    derived from the scores (every split of a token into two tokens, the
    best-scoring token first), byte fallback, BOS added."""
    toks, scores = llama2c_vocab()
    toks = [t.replace(" ", "\u2581") for t in toks]
    toks[0], toks[1], toks[2] = "<unk>", "<s>", "</s>"
    vocab = {t: i for i, t in enumerate(toks)}
    merges = []
    for i, t in enumerate(toks):
        if i < 259:
            continue
        for k in range(1, len(t)):
            if t[:k] in vocab and t[k:] in vocab and vocab[t[:k]] >= 259 and vocab[t[k:]] >= 259:
                merges.append((-scores[i], i, k, t[:k], t[k:]))
    merges.sort()
    tok = Tokenizer(models.BPE(vocab, [(m[3], m[4]) for m in merges], unk_token="<unk>",
                               byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                           normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in ("<unk>", "<s>", "</s>")])
    return tok, {"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True}


def normalized(tokens, merges, types, template):
    """Qwen2's real tokenizer.json: NFC, then the Qwen2 split and ByteLevel;
    also NFKC and a Sequence of NFD, Lowercase and Strip on the same split."""
    made = {}
    norms = {"qwen2-nfc": normalizers.NFC(), "qwen2-nfkc": normalizers.NFKC(),
             "qwen2-nfkd": normalizers.NFKD(),
             "qwen2-seq": normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase(),
                                                normalizers.Strip()])}
    for name, norm in norms.items():
        tok, cfg = byte_level("qwen2", tokens, merges, types, template)
        tok.normalizer = norm
        made[name] = (tok, cfg)
    return made


def flagged(tok):
    """tok with FLAGGED added after its vocabulary (normalized=False, as
    Phi-3's and Llama 2's files have them)."""
    for content, kw in FLAGGED:
        t = AddedToken(content, normalized=False, **{k: v for k, v in kw.items() if k != "special"})
        if kw["special"]:
            tok.add_special_tokens([t])
        else:
            tok.add_tokens([t])
    return tok


def save(tok, cfg, d):
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f)


def run(args, data=None):
    p = subprocess.run([NF] + args, input=data, capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def ours(d, text, *extra):
    # a file of its own: other runs are going on beside this one
    with tempfile.NamedTemporaryFile(dir=WORK, suffix=".txt", delete=False) as f:
        f.write(text.encode("utf-8"))
    try:
        rc, out, err = run(["tokenize", d, "--file", f.name, "--json"] + list(extra))
    finally:
        os.unlink(f.name)
    return json.loads(out) if rc == 0 else "exit %d: %s" % (rc, err)


def detok(d, ids):
    rc, out, err = run(["detokenize", d, "--json", json.dumps(ids)])
    return out.decode("utf-8", "replace") if rc == 0 else "exit %d: %s" % (rc, err)


def check_ids(name, d, tok):
    bad = []
    for text, got in zip(CHECKED, each(lambda t: ours(d, t), CHECKED)):
        want = tok.encode(text).ids
        if got != want:
            bad.append("ids %r:\n want %s\n got  %s" % (text[:60], want[:40], str(got)[:300]))
    tap(not bad, "%s: %d strings: ids equal Hugging Face's" % (name, len(CORPUS)), "\n".join(bad))


def hf_forms(tok, text):
    """HF's ids for text, its ids with control tokens as text, and its decoding."""
    want = tok.encode(text).ids
    tok.encode_special_tokens = True
    want_ns = tok.encode(text).ids
    tok.encode_special_tokens = False
    return want, want_ns, tok.decode(want, skip_special_tokens=True)


def compare_one(d, text, want, want_ns, decoded, roundtrip):
    """Our binary on one string in every form: the list of what differs."""
    got = ours(d, text)
    if got != want:
        return ["ids %r:\n want %s\n got  %s" % (text[:60], want[:40], str(got)[:300])]
    bad = []
    got_ns = ours(d, text, "--no-special")
    if got_ns != want_ns:
        bad.append("--no-special %r:\n want %s\n got  %s" % (text[:60], want_ns[:40], str(got_ns)[:300]))
    back = detok(d, want)
    if back != decoded:
        bad.append("detokenize %r: got %r" % (text[:60], back[:80]))
    if roundtrip and "<|" not in text and detok(d, want_ns) != text:
        bad.append("round trip %r" % text[:60])
    return bad


def check(name, d, tok, roundtrip):
    """Every corpus string: ids, ids with control tokens as text, decoding."""
    # HF's side first, one string at a time: hf_forms flips a flag on tok
    forms = [(text,) + hf_forms(tok, text) for text in CHECKED]
    found = each(lambda f: compare_one(d, *f, roundtrip), forms)
    bad = [line for lines in found for line in lines]
    tap(not bad, "%s: %d strings: ids, --no-special ids and detokenize equal Hugging Face's"
        % (name, len(CORPUS)), "\n".join(bad))


def writer_check(name, src, tok):
    """Our writer's files load in Hugging Face and give the same ids."""
    dst = os.path.join(WORK, name + "-rewritten")
    p = subprocess.run([os.path.join(os.environ["NF_BUILD"], "tools", "nf_tokenizer_tool"),
                        "rewrite", src, dst], capture_output=True)
    if p.returncode != 0:
        tap(False, "%s: our writer's tokenizer.json" % name, p.stderr.decode())
        return
    again = Tokenizer.from_file(os.path.join(dst, "tokenizer.json"))
    with open(os.path.join(dst, "tokenizer_config.json")) as f:
        cfg = json.load(f)
    bad = [t[:40] for t in CORPUS if again.encode(t).ids != tok.encode(t).ids]
    bad += [t[:40] for t, got in zip(CORPUS[:8], each(lambda t: ours(dst, t), CORPUS[:8]))
            if got != tok.encode(t).ids]
    tap(not bad, "%s: our writer's tokenizer.json gives HF's ids in HF and in ours" % name,
        "\n".join(map(repr, bad)))
    tap(cfg.get("bos_token") is not None and "add_bos_token" in cfg,
        "%s: our tokenizer_config.json names the BOS token and add_bos_token" % name, cfg)


def one_line_exit2(args, name):
    rc, out, err = run(args)
    tap(rc == 2 and out == b"" and err.count("\n") == 1, "%s: exit 2, one line on stderr" % name,
        "rc %d stdout %r stderr %r" % (rc, out[:80], err))


def cli_checks(d):
    """Bad input, the llama2.c engine folder, and the JSON array form."""
    one_line_exit2(["detokenize", d, "--ids", "1 99999999"], "an id out of range")
    one_line_exit2(["detokenize", d, "--json", "[1, \"x\"]"], "a JSON id that is not a number")
    one_line_exit2(["detokenize", d, "--ids", "1 two"], "an id that is not a number")
    one_line_exit2(["tokenize", d], "neither --text nor --file")
    one_line_exit2(["tokenize", os.path.join(WORK, "nowhere"), "--text", "x"], "no such folder")
    bad = os.path.join(WORK, "damaged")
    os.makedirs(bad, exist_ok=True)
    with open(os.path.join(bad, "tokenizer.json"), "w") as f:
        f.write('{"model": {"type": "BPE", "vocab": {"a": 0,}}}')
    one_line_exit2(["tokenize", bad, "--text", "x"], "a damaged tokenizer.json")
    rc, out, err = run(["detokenize", bad, "--ids", "0"])
    tap(rc == 2 and "tokenizer.json: 1:" in err, "its message names the file and line:col", err)
    eng = os.path.join(WORK, "llama2c-engine")
    os.makedirs(eng, exist_ok=True)
    with open(os.path.join(SHARED, "models/stories260K/tok512.bin"), "rb") as f:
        data = f.read()
    with open(os.path.join(eng, "tokenizer.bin"), "wb") as f:
        f.write(data)
    rc, out, err = run(["tokenize", eng, "--text", "Once upon a time"])
    tap(rc == 0 and out == b"1 403 407 261 378\n", "tokenizer.bin: BOS and run.c's ids (%r)" % out, err)
    rc, out, err = run(["tokenize", eng, "--text", "Once upon a time", "--json"])
    tap(rc == 0 and out == b"[1,403,407,261,378]\n", "--json prints a JSON array (%r)" % out, err)
    rc, out, err = run(["detokenize", eng, "--ids", "1 403 407 261 378"])
    tap(rc == 0 and out == b"Once upon a time", "detokenize prints the text and nothing else (%r)" % out, err)


def normalizer_checks():
    """Each normalizer gives HF's ids, and the corpus would catch it skipped."""
    global CORPUS
    tokens, merges, types, template = gguf_vocab()
    plain, _ = byte_level("qwen2", tokens, merges, types, template)
    base = CORPUS
    CORPUS = base + NORM_CORPUS
    for name, (tok, cfg) in normalized(tokens, merges, types, template).items():
        d = os.path.join(WORK, name)
        save(tok, cfg, d)
        differ = [t for t in NORM_CORPUS if tok.encode(t).ids != plain.encode(t).ids]
        tap(len(differ) >= 3, "%s: the normalizer changes the ids of %d of %d strings"
            % (name, len(differ), len(NORM_CORPUS)))
        check(name, d, tok, roundtrip=False)
        if name in ("qwen2-nfc", "qwen2-seq"):
            writer_check(name, d, tok)
    CORPUS = base


def flag_checks():
    """lstrip/rstrip/single_word on the SentencePiece and byte-level kinds."""
    global CORPUS
    base = CORPUS
    CORPUS = base + FLAG_CORPUS
    tok, cfg = sentencepiece()
    tokens, merges, types, template = gguf_vocab()
    bl, blcfg = byte_level("llama3", tokens, merges, types, template)
    for name, (t, c) in (("spm-flags", (tok, cfg)), ("llama3-flags", (bl, blcfg))):
        t = flagged(t)
        d = os.path.join(WORK, name)
        save(t, c, d)
        check(name, d, t, roundtrip=False)
        writer_check(name, d, t)
    CORPUS = base


def main():
    tokens, merges, types, template = gguf_vocab()
    for name in ("smollm", "gpt2", "llama3", "qwen2"):
        tok, cfg = byte_level(name, tokens, merges, types, template)
        d = os.path.join(WORK, name)
        save(tok, cfg, d)
        check(name, d, tok, roundtrip=True)
        if name in ("smollm", "llama3"):
            writer_check(name, d, tok)
    tok, _ = byte_level("smollm", tokens, merges, types, template)
    chat = "<|im_start|>user\nhi<|im_end|>"
    want = (" ".join(map(str, tok.encode(chat).ids)) + "\n").encode()
    rc, out, _ = run(["tokenize", os.path.join(WORK, "smollm"), "--text", chat])
    tap(rc == 0 and out == want and out.startswith(b"1 "),
        "smollm: plain output is the ids, space-separated, and nothing else (%r)" % out)
    tokens, merges, types = trained_vocab()
    built = {}
    for name in ("smollm", "gpt2", "llama3", "qwen2"):
        tok, cfg = byte_level(name, tokens, merges, types, None)
        built[name] = tok
        d = os.path.join(WORK, "trained-" + name)
        save(tok, {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}, d)
        check_ids("trained vocabulary, " + name, d, tok)
    differ = all(any(built[a].encode(t).ids != built[b].encode(t).ids for t in CORPUS)
                 for a in built for b in built if a < b)
    tap(differ, "the trained vocabulary tells every pair of families apart on the corpus")
    cli_checks(os.path.join(WORK, "smollm"))
    tok, cfg = sentencepiece()
    d = os.path.join(WORK, "spm")
    save(tok, cfg, d)
    check("sentencepiece (tok512)", d, tok, roundtrip=False)
    writer_check("spm", d, tok)
    normalizer_checks()
    flag_checks()
    print("1..%d" % N)


main()
