"""Tokenizer facts sotto stores in the GGUF: token bytes, special ids,
language codes and openai's suppress lists.

The engine never needs the merges table: Whisper's vocabularies are tiktoken
encodings, where a BPE token's merge rank is its id. So the token bytes in id
order are the whole tokenizer, and this module only has to get them right
(undo GPT-2's byte-to-unicode mapping) and derive the special ids from them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .common import ConvertError

# openai/whisper tokenizer.py LANGUAGES order (the order of the language
# tokens after <|startoftranscript|>); "yue" only exists in n_vocab 51866.
LANGUAGE_CODES = (
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no "
    "th ur hr bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw "
    "gl mr pa si km sn yo so af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl "
    "mg as tt haw ln ha ba jw su yue"
).split()

# Pre-tokenizer of GPT-2 / tiktoken's "gpt2" and whisper's encodings.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable-unicode-char table: printable
    Latin-1 bytes map to themselves, the other 68 bytes to U+0100 upward in
    byte order. HF and CT2 vocabularies store tokens in this alphabet."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(0x100 + extra)
            extra += 1
    return table


_BYTE_DECODER = {c: b for b, c in bytes_to_unicode().items()}


def decode_bpe_string(s: str) -> bytes:
    """A vocabulary string in GPT-2's alphabet -> the raw bytes it stands for."""
    try:
        return bytes(_BYTE_DECODER[c] for c in s)
    except KeyError as e:
        raise ConvertError(f"token {s!r} has a character outside the byte-level BPE alphabet: {e}") from None


def vocab_strings_to_bytes(strings: list[str], n_bpe: int) -> list[bytes]:
    """Token strings in id order -> bytes: BPE tokens (ids < n_bpe) are
    decoded from GPT-2's alphabet, specials and timestamps kept as text."""
    return [decode_bpe_string(s) if i < n_bpe else s.encode("utf-8") for i, s in enumerate(strings)]


SPECIAL_STRINGS = {
    "eot": ["<|endoftext|>"],
    "sot": ["<|startoftranscript|>"],
    "translate": ["<|translate|>"],
    "transcribe": ["<|transcribe|>"],
    "sot_lm": ["<|startoflm|>"],
    "sot_prev": ["<|startofprev|>"],
    "no_speech": ["<|nospeech|>", "<|nocaptions|>"],
    "no_timestamps": ["<|notimestamps|>"],
    "timestamp_begin": ["<|0.00|>"],
}


@dataclass
class Specials:
    """Special token ids found by their text, plus derived facts."""

    ids: dict[str, int]
    languages: list[str]
    n_bpe: int


def is_multilingual(n_vocab: int) -> bool:
    """openai's rule: .en models have 51864 tokens, multilingual 51865+."""
    return n_vocab >= 51865


def find_specials(tokens: list[bytes], n_vocab: int) -> Specials:
    """Locate the special ids by token text and check their layout against
    openai's (contiguous block after the BPE ranks, timestamps to the end)."""
    index: dict[bytes, int] = {}
    for i, t in enumerate(tokens):
        index.setdefault(t, i)
    ids: dict[str, int] = {}
    for key, alts in SPECIAL_STRINGS.items():
        for s in alts:
            if s.encode() in index:
                ids[key] = index[s.encode()]
                break
        else:
            raise ConvertError(f"tokenizer has no {alts[0]} token")
    n_bpe = ids["eot"]
    if ids["sot"] != n_bpe + 1:
        raise ConvertError(f"<|startoftranscript|> is {ids['sot']}, expected eot+1 = {n_bpe + 1}")
    order = ["translate", "transcribe", "sot_lm", "sot_prev", "no_speech", "no_timestamps", "timestamp_begin"]
    for a, b in zip(order, order[1:]):
        if ids[b] != ids[a] + 1:
            raise ConvertError(f"special tokens out of openai's order: {a}={ids[a]}, {b}={ids[b]}")
    n_ts = n_vocab - ids["timestamp_begin"]
    if n_ts != 1501:
        raise ConvertError(f"expected 1501 timestamp tokens after <|0.00|>, found {n_ts}")
    for k in range(n_ts):
        want = f"<|{k * 0.02:.2f}|>".encode()
        if tokens[ids["timestamp_begin"] + k] != want:
            raise ConvertError(f"token {ids['timestamp_begin'] + k} is {tokens[ids['timestamp_begin'] + k]!r}, expected {want!r}")
    languages = []
    for i in range(ids["sot"] + 1, ids["translate"]):
        t = tokens[i]
        if not (t.startswith(b"<|") and t.endswith(b"|>")):
            raise ConvertError(f"token {i} ({t!r}) between sot and translate is not a language token")
        languages.append(t[2:-2].decode())
    if not is_multilingual(n_vocab):
        languages = []  # .en models carry the language tokens but cannot use them
    return Specials(ids=ids, languages=languages, n_bpe=n_bpe)


def special_token_strings(n_vocab: int) -> list[tuple[int, bytes]]:
    """openai's special tokens (id, text) for a vocabulary of n_vocab ids,
    derived from n_vocab alone the way openai/whisper.cpp do. Used for
    whisper.cpp files, whose vocab holds only the BPE tokens."""
    multi = is_multilingual(n_vocab)
    n_lang = n_vocab - 51765 - (1 if multi else 0)
    if not 0 < n_lang <= len(LANGUAGE_CODES):
        raise ConvertError(f"n_vocab {n_vocab} does not match any Whisper vocabulary")
    n_bpe = 50257 if multi else 50256
    names = ["<|endoftext|>", "<|startoftranscript|>"]
    names += [f"<|{c}|>" for c in LANGUAGE_CODES[:n_lang]]
    names += ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]
    names += [f"<|{k * 0.02:.2f}|>" for k in range(1501)]
    if n_bpe + len(names) != n_vocab:
        raise ConvertError(f"n_vocab {n_vocab} does not match any Whisper vocabulary")
    return [(n_bpe + i, s.encode()) for i, s in enumerate(names)]


# Older Hugging Face Whisper tokenizers (and CT2 models converted from them)
# name two specials differently from openai's tiktoken tokenizer.
SPECIAL_ALIASES = {b"<|nocaptions|>": b"<|nospeech|>", b"<|iw|>": b"<|he|>"}


def normalise_specials(tokens: list[bytes], n_vocab: int) -> list[bytes]:
    """Replace the special/timestamp token texts by openai's canonical ones,
    after checking the source has openai's layout (same ids, same texts up to
    known aliases). This makes the GGUF independent of which tokenizer
    revision the source carried, so all formats convert identically."""
    canon = special_token_strings(n_vocab)
    n_bpe = canon[0][0]
    if len(tokens) != n_vocab:
        raise ConvertError(f"tokenizer has {len(tokens)} tokens, expected n_vocab {n_vocab}")
    for i, want in canon:
        got = tokens[i]
        if got != want and SPECIAL_ALIASES.get(got) != want:
            raise ConvertError(f"token {i} is {got!r}, expected openai's {want!r}: not a Whisper tokenizer layout")
    return tokens[:n_bpe] + [s for _, s in canon]


class BPE:
    """Minimal tiktoken-style byte-level BPE: split text with the GPT-2
    pattern, then repeatedly merge the adjacent pair whose concatenation has
    the lowest rank (rank = token id). Only used to compute the non-speech
    suppress list from the model's own vocabulary."""

    def __init__(self, tokens: list[bytes], n_bpe: int):
        import regex

        self.ranks = {t: i for i, t in enumerate(tokens[:n_bpe])}
        self.pat = regex.compile(GPT2_PATTERN)

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        for piece in self.pat.findall(text):
            out += self._encode_piece(piece.encode("utf-8"))
        return out

    def _encode_piece(self, b: bytes) -> list[int]:
        parts = [b[i : i + 1] for i in range(len(b))]
        while len(parts) > 1:
            best, best_i = None, -1
            for i in range(len(parts) - 1):
                r = self.ranks.get(parts[i] + parts[i + 1])
                if r is not None and (best is None or r < best):
                    best, best_i = r, i
            if best is None:
                break
            parts[best_i : best_i + 2] = [parts[best_i] + parts[best_i + 1]]
        try:
            return [self.ranks[p] for p in parts]
        except KeyError as e:
            raise ConvertError(f"vocabulary cannot encode byte {e}") from None


def non_speech_tokens(bpe: BPE) -> list[int]:
    """openai/whisper Tokenizer.non_speech_tokens, reproduced: symbols and
    bracket runs that would let the model emit speaker tags or annotations.
    A symbol is suppressed if it (or " "+symbol) is a single token; musical
    symbols (U+2640..U+267F) suppress their first token regardless."""
    symbols = list('"#()*+/:;<=>@[\\]^_`{|}~「」『』')
    symbols += "<< >> <<< >>> -- --- -( -[ (' (\" (( )) ((( ))) [[ ]] {{ }} ♪♪ ♪♪♪".split()
    miscellaneous = set("♩♪♫♬♭♮♯")
    result = {bpe.encode(" -")[0], bpe.encode(" '")[0]}
    for symbol in symbols + sorted(miscellaneous):
        for toks in (bpe.encode(symbol), bpe.encode(" " + symbol)):
            if len(toks) == 1 or symbol in miscellaneous:
                result.add(toks[0])
    return sorted(result)


def suppress_tokens(tokens: list[bytes], sp: Specials) -> list[int]:
    """openai's suppress_tokens="-1" set: non-speech symbols plus
    transcribe, translate, sot, sot_prev, sot_lm and no_speech; sorted."""
    ids = set(non_speech_tokens(BPE(tokens, sp.n_bpe)))
    ids |= {sp.ids[k] for k in ("transcribe", "translate", "sot", "sot_prev", "sot_lm", "no_speech")}
    return sorted(ids)
