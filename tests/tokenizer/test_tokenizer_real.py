"""lib/model/tokenizer.c against tiktoken on the real Whisper vocabularies.

Builds tests/tokenizer/tok_driver.c with lib/model/tokenizer.c
and tokenizer-encode.c with gcc (plus ASan/UBSan when the compiler has
them), dumps gpt2.tiktoken and multilingual.tiktoken from the
openai-whisper sdist with the specials appended as whisper/tokenizer.py
get_encoding() does, and compares tok_encode with tiktoken's
encode_ordinary and tok_decode with decode(errors="replace"), offline.
Without tiktoken it falls back to a plain Python BPE over the `regex`
module (slower, and limited to codepoints assigned in Python's Unicode
database, since `regex` may follow a newer Unicode than tiktoken).

The rank files come from $SOTTO_WHISPER_SDIST (a .tar.gz or an unpacked
directory), else from ~/.cache/sotto/dl/openai_whisper-*.tar.gz, fetched
once with `pip download --no-deps openai-whisper==20250625` if missing;
they and the vocabulary dumps are cached in ~/.cache/sotto/tokenizer/.
"""
import base64
import glob
import os
import random
import shutil
import subprocess
import sys
import tarfile
import unicodedata

import pytest
from audio import MANIFEST

try:
    import tiktoken
except ImportError:
    tiktoken = None
    import regex

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
CACHE = os.path.expanduser("~/.cache/sotto")
TOKCACHE = os.path.join(CACHE, "tokenizer")
SDIST = "openai-whisper==20250625"
PAT = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"""
       r"""|\s+(?!\S)|\s+""")
LANGUAGES = [
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca",
    "nl", "ar", "sv", "it", "id", "hi", "fi", "vi", "he", "uk", "el", "ms",
    "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg", "lt", "la",
    "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn",
    "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",
    "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be",
    "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn",
    "mt", "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln", "ha",
    "ba", "jw", "su", "yue",
]

SENTENCES = [
    "Hello world",
    " Hello world",
    "And so, my fellow Americans: ask not what your country can do for you"
    " -- ask what you can do for your country.",
    "I'm sure you've heard they'll say it's John's, we'd've thought 'tis.",
    "I'M SURE YOU'VE HEARD THEY'LL SAY IT'S",
    "'s 't 're 've 'm 'll 'd 'x ''s !'s",
    "Numbers: 1234567890, 3.14159, 1,000,000 and 42nd street; 2024-01-01",
    "multiple   spaces\tand\ttabs\n\nnewlines  \n  trailing   ",
    "   leading spaces",
    "trailing space ",
    " ",
    "  ",
    "\n",
    "a\u00a0b\u3000c \u2003d",
    "punctuation!!! ... ??? (parens) [brackets] {braces} <angle> \"quotes\"",
    "email@example.com https://example.org/path?q=1&r=2#frag",
    "Ça va? Très bien, merci. Où est la bibliothèque?",
    "Grüße aus München! Das Mädchen läuft über die Straße.",
    "¿Dónde está el baño? ¡Olé!",
    "Привет, как дела? Всё хорошо, спасибо.",
    "Γειά σου Κόσμε! Καλημέρα.",
    "你好，世界！今天天气很好。",
    "こんにちは世界。カタカナとひらがな、漢字。",
    "안녕하세요 세계! 반갑습니다.",
    "नमस्ते दुनिया, आप कैसे हैं? १२३",
    "مرحبا بالعالم! ١٢٣",
    "שלום עולם",
    "สวัสดีชาวโลก ๑๒๓",
    "Xin chào thế giới, tiếng Việt có dấu.",
    "emoji 🎉🎉 and 👍🏽 family 👨‍👩‍👧 flags 🇫🇷",
    "math ∑ x² ≤ ½ × π ≈ 3.14 ① Ⅻ",
    "<|endoftext|> is just text here",
    "tabs\t\t\tbetween",
    "\r\n windows\r\nlines\r\n",
    "combining e\u0301 a\u0308 and zero\u200bwidth",
    "a" * 300,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
]


def _tiktoken_path(name):
    """whisper/assets/<name>.tiktoken, extracted once from the sdist."""
    out = os.path.join(TOKCACHE, name + ".tiktoken")
    if os.path.exists(out):
        return out
    src = os.environ.get("SOTTO_WHISPER_SDIST")
    if src and os.path.isdir(src):
        found = glob.glob(os.path.join(src, "**", "assets",
                                       name + ".tiktoken"), recursive=True)
        return found[0]
    if not src:
        dl = os.path.join(CACHE, "dl")
        os.makedirs(dl, exist_ok=True)
        found = glob.glob(os.path.join(dl, "openai_whisper-*.tar.gz"))
        if not found:
            r = subprocess.run([sys.executable, "-m", "pip", "download",
                                "--no-deps", SDIST, "-d", dl],
                               capture_output=True, text=True)
            found = glob.glob(os.path.join(dl, "openai_whisper-*.tar.gz"))
            if r.returncode != 0 or not found:
                pytest.fail("cannot fetch %s: %s" % (SDIST,
                                                     r.stderr[-300:]))
        src = sorted(found)[-1]
    with tarfile.open(src) as tf:
        member = next(m for m in tf.getmembers()
                      if m.name.endswith("whisper/assets/%s.tiktoken" % name))
        data = tf.extractfile(member).read()
    os.makedirs(TOKCACHE, exist_ok=True)
    with open(out + ".tmp", "wb") as f:
        f.write(data)
    os.replace(out + ".tmp", out)
    return out


def _ranks(name):
    ranks = {}
    with open(_tiktoken_path(name)) as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    return ranks


class PyBPE:
    """Reference byte-level BPE: the pattern's pieces, each merged by
    lowest pair rank (leftmost on ties) unless it is a token itself."""

    def __init__(self, ranks):
        self.ranks = ranks
        self.pat = regex.compile(PAT)

    def encode_ordinary(self, text):
        out = []
        for piece in self.pat.findall(text):
            b = piece.encode()
            if b in self.ranks:
                out.append(self.ranks[b])
                continue
            parts = [bytes([x]) for x in b]
            while len(parts) > 1:
                pairs = [(self.ranks.get(parts[i] + parts[i + 1]), i)
                         for i in range(len(parts) - 1)]
                pairs = [x for x in pairs if x[0] is not None]
                if not pairs:
                    break
                i = min(pairs)[1]
                parts[i:i + 2] = [parts[i] + parts[i + 1]]
            out += [self.ranks[x] for x in parts]
        return out


class Vocab:
    def __init__(self, name, multilingual):
        ranks = _ranks(name)
        n_bpe = len(ranks)
        langs = LANGUAGES if multilingual else []
        specials = (["<|endoftext|>", "<|startoftranscript|>"]
                    + ["<|%s|>" % c for c in LANGUAGES]
                    + ["<|translate|>", "<|transcribe|>", "<|startoflm|>",
                       "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]
                    + ["<|%.2f|>" % (i * 0.02) for i in range(1501)])
        self.special_tokens = {s: n_bpe + i for i, s in enumerate(specials)}
        if tiktoken is not None:
            self.enc = tiktoken.Encoding(name, pat_str=PAT,
                                         mergeable_ranks=ranks,
                                         special_tokens=self.special_tokens)
        else:
            self.enc = PyBPE(ranks)
        byid = [None] * n_bpe
        for b, r in ranks.items():
            byid[r] = b
        assert None not in byid, "ranks are not 0..n-1"
        self.pieces = byid + [s.encode() for s in specials]
        self.n_bpe = n_bpe
        self.eot = n_bpe
        st = self.special_tokens
        self.specials = [st["<|endoftext|>"], st["<|startoftranscript|>"],
                         st["<|translate|>"], st["<|transcribe|>"],
                         st["<|startoflm|>"], st["<|startofprev|>"],
                         st["<|nospeech|>"], st["<|notimestamps|>"],
                         st["<|0.00|>"]]
        self.langs = langs
        self.path = os.path.join(TOKCACHE, "vocab-%s.txt" % name)
        self._dump()

    def decode_bytes(self, ids):
        return b"".join(self.pieces[i] for i in ids)

    def _dump(self):
        head = "sotto-tok 1 %d %d %s %d %s\n" % (
            len(self.pieces), self.n_bpe,
            " ".join(str(x) for x in self.specials), len(self.langs),
            " ".join(self.langs))
        os.makedirs(TOKCACHE, exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write(head)
            for p in self.pieces:
                f.write((p.hex() or "-") + "\n")
        os.replace(tmp, self.path)


@pytest.fixture(scope="session")
def driver(tmp_path_factory):
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.fail("no C compiler")
    exe = str(tmp_path_factory.mktemp("tok") / "tok_driver")
    base = [cc, "-std=c17", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror",
            "-Wshadow", "-Wstrict-prototypes", "-Wmissing-prototypes",
            "-O1", "-g", "-I", os.path.join(ROOT, "lib"),
            "-I", os.path.join(ROOT, "lib", "kernels"),
            "-I", os.path.join(ROOT, "lib", "model"),
            os.path.join(ROOT, "lib", "model", "tokenizer.c"),
            os.path.join(ROOT, "lib", "model", "tokenizer-encode.c"),
            os.path.join(ROOT, "lib", "kernels", "err.c"),
            os.path.join(ROOT, "tests", "tokenizer", "tok_driver.c"),
            "-o", exe]
    san = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
    r = subprocess.run(base + san, capture_output=True, text=True)
    if r.returncode != 0:
        r = subprocess.run(base, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


@pytest.fixture(scope="session", params=[("gpt2", False),
                                         ("multilingual", True)],
                ids=["gpt2", "multilingual"])
def vocab(request):
    return Vocab(*request.param)


def run(driver, vocab, commands):
    """Feed commands to one driver process; one answer line each."""
    r = subprocess.run([driver, vocab.path], input="\n".join(commands) + "\n",
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.split("\n")[:-1]
    assert len(out) == len(commands), r.stderr[-2000:]
    return out


def transcripts():
    # A missing set fails here (open), not an empty list of cases.
    with open(MANIFEST) as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    out = []
    for row in rows:
        if len(row) > 2 and row[2]:
            out += [row[2], " " + row[2], " " + row[2].capitalize() + "."]
    return out


def random_texts(n, seed):
    rng = random.Random(seed)
    pools = [
        " \t\n\r\u00a0\u3000abcXYZ019'.,!?-",
        "abc déf ÄÖÜ ßñ ю я Ωλ 中文字 かな ㄱ 한 ١٢ ९ ½ ² 𝟘 🎉 ' s t",
        "sdtmlrve' ",
    ]
    out = []
    for i in range(n):
        if i % 4 == 3:
            # Any scalar value: exercises the whole class table.
            chars = []
            for _ in range(rng.randint(1, 12)):
                cp = rng.randrange(0x110000)
                if 0xD800 <= cp <= 0xDFFF or (
                        tiktoken is None
                        and unicodedata.category(chr(cp)) == "Cn"):
                    cp = 0x20
                chars.append(chr(cp))
                chars.append(rng.choice(" a1'!"))
            out.append("".join(chars))
        else:
            pool = pools[i % 3]
            out.append("".join(rng.choice(pool)
                               for _ in range(rng.randint(1, 40))))
    return out


def test_encode_matches_tiktoken(driver, vocab):
    texts = SENTENCES + transcripts() + random_texts(3000, 1234)
    cmds = ["E " + t.encode().hex() for t in texts]
    got = run(driver, vocab, cmds)
    bad = []
    for t, g in zip(texts, got):
        want = " ".join(str(x) for x in vocab.enc.encode_ordinary(t))
        if g != want:
            bad.append((t, want, g))
    assert not bad, "%d mismatches, first: %r" % (len(bad), bad[:3])


def test_space_is_220(driver, vocab):
    assert run(driver, vocab, ["E " + b" ".hex()]) == ["220"]


def test_decode_matches_tiktoken(driver, vocab):
    rng = random.Random(99)
    n_vocab = len(vocab.pieces)
    seqs = []
    for i in range(2000):
        n = rng.randint(0, 12)
        if i % 3 == 0:
            # Mostly byte-level tokens: lots of invalid UTF-8.
            ids = [rng.randrange(0, 256) for _ in range(n)]
        else:
            ids = [rng.randrange(0, n_vocab) for _ in range(n)]
        seqs.append(ids)
    for t in SENTENCES:
        ids = vocab.enc.encode_ordinary(t)
        seqs.append(ids)
        seqs.append(ids[:-1] + [vocab.specials[-1] + 7] + ids[-1:])
    cmds = ["D " + " ".join(map(str, s)) for s in seqs]
    cmds += ["R " + " ".join(map(str, s)) for s in seqs]
    got = run(driver, vocab, cmds)
    for k, ids in enumerate(seqs):
        text = [x for x in ids if x < vocab.eot]
        raw = vocab.decode_bytes(text)
        want = raw.decode("utf-8", errors="replace").encode()
        # tok_decode returns a C string: it ends at an embedded NUL.
        assert got[k] == want.split(b"\0")[0].hex(), ids
        assert got[len(seqs) + k] == raw.hex(), ids
        if tiktoken is not None:
            assert vocab.enc.decode_bytes(text) == raw
            assert vocab.enc.decode(text, errors="replace").encode() == want


def test_complete_prefix(driver, vocab):
    rng = random.Random(5)
    cases = []
    for _ in range(500):
        s = bytes(rng.choice([0x41, 0x80, 0xbf, 0xc2, 0xc3, 0xe0, 0xe2,
                              0xed, 0xf0, 0xf4, 0xf5, 0x9f, 0xa0, 0x90])
                  for _ in range(rng.randint(0, 6)))
        cases.append(s)
    got = run(driver, vocab, ["P " + s.hex() for s in cases])
    for s, g in zip(cases, got):
        assert int(g) == len(s) - _held_tail(s), s


def _held_tail(s):
    """Length of a trailing sequence that is valid so far but cut short:
    Python reports "unexpected end of data" from its first byte. (Python's
    incremental decoder also holds back ED A0..BF, a surrogate prefix,
    which is invalid UTF-8; sotto does not.)"""
    for k in range(1, min(3, len(s)) + 1):
        if s[-k] & 0xC0 == 0x80:
            continue
        try:
            s[-k:].decode("utf-8")
        except UnicodeDecodeError as e:
            if e.reason == "unexpected end of data" and e.start == 0:
                return k
        return 0
    return 0


def test_language_index(driver, vocab):
    got = run(driver, vocab, ["L en", "L yue", "L xx"])
    if vocab.langs:
        assert got == ["0", str(len(LANGUAGES) - 1), "-1"]
    else:
        assert got == ["-1", "-1", "-1"]
