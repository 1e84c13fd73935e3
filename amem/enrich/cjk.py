"""Offline keyword candidates of CJK text: jieba TF-IDF for Chinese (function words left out,
verbs ranked after nouns and names), kanji and katakana runs for Japanese, hangul words without their
particles for Korean. :mod:`amem.enrich.keywords` merges them with the alphabetic ones.

Each function returns ``{display: (score, first position, display, keys)}``, the candidate
shape of :func:`amem.enrich.keywords._select`.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from .. import segment
from ..kernel.text import HAN, HANGUL, KATAKANA

HAN_RUN = re.compile(f"[{HAN}]+")
HANGUL_RUN = re.compile(f"[{HANGUL}]+")
_JA_RUN = re.compile(f"[{HAN}{KATAKANA}]{{2,}}")

Candidates = dict[str, tuple[float, int, str, frozenset[str]]]

#: Chinese words jieba's IDF does not push down far enough
ZH_STOP = frozenset("我们 你们 他们 她们 自己 这个 那个 这些 那些 什么 怎么 因为 所以 但是 然后 已经 可以 "
                    "没有 一个 一些 今天 昨天 明天 现在 时候 觉得 知道 还是 就是 如果 虽然 非常 真的 一起 一下 需要 应该 "
                    "喜欢 认为 希望 表示 成为 进行 开始 可能 能够 "
                    # times of day and days of the week: every diary has them, so two notes
                    # sharing one (下午, "afternoon") are no more related for it
                    "上午 下午 中午 晚上 早上 早晨 傍晚 凌晨 今晚 昨晚 明晚 夜里 周末 星期 礼拜 周一 周二 周三 "
                    "周四 周五 周六 周日 星期一 星期二 星期三 星期四 星期五 星期六 星期日 星期天 每天 "
                    "最近 刚才 以前 以后 之前 之后 小时 分钟 时间".split())
#: the same for Japanese kanji runs: times of day, days, "time"
JA_STOP = frozenset("午前 午後 今日 明日 昨日 今朝 今晩 今夜 夕方 週末 毎日 時間 時頃 曜日 月曜日 火曜日 水曜日 "
                    "木曜日 金曜日 土曜日 日曜日".split())
_KO_PARTICLES = ("에서는", "에게서", "으로는", "이라고", "라고", "에서", "에게", "한테", "으로", "까지", "부터",
                 "처럼", "보다", "하고", "이랑", "은", "는", "이", "가", "을", "를", "에", "의", "와", "과", "도",
                 "로", "만", "랑")
_KO_PREDICATE_ENDINGS = ("요", "니다", "했다", "한다", "었다", "았다", "겠다", "어", "지만")
_KO_STOP = frozenset("그리고 하지만 그래서 그런데 저는 나는 우리 우리는 정말 너무 오늘 어제 내일 지금 이것 그것 "
                     "저것 여기 거기 어떤 무엇 아주 매우 같이 함께 다시 모두 많이 오전 오후 저녁 아침 점심 "
                     "주말 시간 매일".split())


def chinese_candidates(text: str, speakers: frozenset[str], limit: int
                       ) -> tuple[Candidates, Counter[str]]:
    han = "，".join(HAN_RUN.findall(text))
    words = segment.cut(han)  # one cut serves the terms and the TF-IDF keywords
    terms: Counter[str] = Counter(w for w in words if len(w) >= 2 and w not in ZH_STOP)
    out: Candidates = {}
    tags = _zh_tags()
    # a verb right after a noun is the noun's action named as a thing (数据库迁移: migration)
    nominal = {w for prev, w in zip(words, words[1:]) if tags.get(prev, "").startswith("n")}
    for word, weight in segment.tfidf_keywords(words, limit * 3):
        if len(word) < 2 or word in ZH_STOP or word in speakers or not HAN_RUN.fullmatch(word):
            continue
        tag = tags.get(word) or ""
        if tag.startswith(_ZH_FUNCTION_TAGS):
            continue  # 之后, 由于, 两个, 其中: grammar, not what the note is about
        if tag == "v" and word not in nominal:
            weight *= 0.5  # a verb (返回, 分为) only when the nouns and names run out
        out[word] = (float(weight), han.find(word), word, frozenset([word]))
    return out, terms


#: jieba part-of-speech tags of function words: conjunction, preposition, pronoun, numeral,
#: direction, adverb, particle, modal, interjection, classifier
_ZH_FUNCTION_TAGS = ("c", "p", "r", "m", "f", "d", "u", "y", "e", "q")


def _zh_tags() -> dict[str, str]:
    """jieba's dictionary part-of-speech tag of each word (loaded with its dictionary)."""
    segment.jieba_modules()
    import jieba.posseg

    tab: dict[str, str] = jieba.posseg.dt.word_tag_tab
    return tab


def japanese_candidates(text: str, speakers: frozenset[str]) -> Candidates:
    counts: Counter[str] = Counter()
    pos: dict[str, int] = {}
    for m in _JA_RUN.finditer(text):
        word = m.group()
        if word in speakers or len(word) > 12 or word in JA_STOP:
            continue
        counts[word] += 1
        pos.setdefault(word, m.start())
    return {w: (c * (1 + 0.15 * min(len(w), 6)), pos[w], w, frozenset([w])) for w, c in counts.items()}


def korean_candidates(text: str) -> Candidates:
    counts: Counter[str] = Counter()
    pos: dict[str, int] = {}
    for m in HANGUL_RUN.finditer(text):
        word = m.group()
        for particle in _KO_PARTICLES:
            if word.endswith(particle) and len(word) - len(particle) >= 2:
                word = word[: -len(particle)]
                break
        if len(word) < 2 or word in _KO_STOP or word.endswith(_KO_PREDICATE_ENDINGS):
            continue
        counts[word] += 1
        pos.setdefault(word, m.start())
    return {w: (1 + math.log(c), pos[w], w, frozenset([w])) for w, c in counts.items()}
