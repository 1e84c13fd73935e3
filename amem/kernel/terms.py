"""The stop words of BM25, shared by amem's notes (``amem.text``) and lcm's hybrid recall (``lcm.ranking.terms``).

One list, so a function word the notes store ignores is ignored in conversation recall too.
"""

from __future__ import annotations

__all__ = ["STOPWORDS"]

# Function words carry no retrieval signal and only cost postings; kept deliberately short.
STOPWORDS = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be been being "
    "it its this that these those i me my we our you your he him his she her they them their "
    "do does did doing have has had so not no yes can could would should will shall might "
    "what which who whom whose when where why how there here than then too very just about into "
    "over under again also any all each both few more most other some such only own same s t "
    "的 了 和 是 在 也 就 都 而 及 与 着 或 一个 我们 你们 他们".split()
)
