"""Loaders for the retrieval benchmark data (LoCoMo, CMRC 2018), per ../shared/benchdata/README.md."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

#: where the shared benchmark data lives: ``$AMEM_BENCHDATA``, else ``../shared/benchdata`` beside
#: the checkout (this project's folder layout). A fresh clone elsewhere has no such folder: the
#: benchmarks then say so, and the test suite skips what needs the data (tests/conftest.py).
BENCHDATA = Path(os.environ.get("AMEM_BENCHDATA")
                 or Path(__file__).resolve().parents[1].parent / "shared" / "benchdata")
DEFAULT_LOCOMO = BENCHDATA / "locomo_dev.json"
DEFAULT_CMRC = BENCHDATA / "cmrc2018_dev_part.json"


@dataclass
class Doc:
    id: str
    text: str
    timestamp: str | None = None
    date_label: str | None = None
    #: the subject of the document the note comes from (a CMRC article's title): what a real
    #: import of a document knows about each of its chunks (``benchmarks.retrieval --source-title``)
    source: str | None = None


@dataclass
class Query:
    text: str
    relevant: set[str]
    category: str
    #: the position of the question's source document in the data (CMRC: its paragraph), so
    #: results can be read on two halves of the documents as well as of the questions
    part: int | None = None


@dataclass
class Corpus:
    """One retrieval scope (a LoCoMo conversation, or all of CMRC)."""

    name: str
    docs: list[Doc] = field(default_factory=list)
    queries: list[Query] = field(default_factory=list)


_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*(am|pm)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})", re.I)


def parse_locomo_date(text: str) -> datetime | None:
    """"1:56 pm on 8 May, 2023" -> datetime (None when the format is unknown)."""
    m = _DATE.search(text or "")
    if not m:
        return None
    hour, minute, ampm, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    try:
        month_no = datetime.strptime(month[:3], "%b").month
    except ValueError:
        return None
    return datetime(int(year), month_no, int(day), h, int(minute))


_ID_SPLIT = re.compile(r"[;,\s]+")


def normalise_evidence(raw: list[str], known: set[str]) -> set[str]:
    """Split, fix "D:11:26" -> "D11:26" and "D30:05" -> "D30:5", keep ids that exist."""
    out: set[str] = set()
    for item in raw:
        for part in _ID_SPLIT.split(str(item)):
            part = part.strip()
            if not part:
                continue
            part = re.sub(r"^D:", "D", part)
            m = re.match(r"^D(\d+):(\d+)$", part)
            if not m:
                continue
            norm = f"D{int(m.group(1))}:{int(m.group(2))}"
            if norm in known:
                out.add(norm)
    return out


def load_locomo(path: str | Path) -> list[Corpus]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    corpora = []
    for conv in data:
        c = conv["conversation"]
        corpus = Corpus(name=conv["sample_id"])
        sessions = sorted((int(k.split("_")[1]) for k in c
                           if re.fullmatch(r"session_\d+", k)))
        for n in sessions:
            when = parse_locomo_date(c.get(f"session_{n}_date_time", ""))
            for turn in c[f"session_{n}"]:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares {turn['blip_caption']}]"
                corpus.docs.append(Doc(
                    id=turn["dia_id"], text=text,
                    timestamp=when.isoformat() if when else None,
                    date_label=when.strftime("%-d %B %Y") if when else None))
        known = {d.id for d in corpus.docs}
        for qa in conv["qa"]:
            relevant = normalise_evidence(qa.get("evidence", []), known)
            if relevant:
                corpus.queries.append(Query(qa["question"], relevant, str(qa["category"])))
        corpora.append(corpus)
    return corpora


_SENT = re.compile(r"[^。！？；]*[。！？；]|[^。！？；]+$")


def split_sentences(text: str) -> list[tuple[int, str]]:
    """(start offset, sentence) pairs; delimiters stay with their sentence."""
    out = []
    for m in _SENT.finditer(text):
        if m.group(0).strip():
            out.append((m.start(), m.group(0)))
    return out


def load_cmrc(path: str | Path, unit: str = "sentence") -> list[Corpus]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    corpus = Corpus(name="cmrc")
    for i, article in enumerate(data["data"]):
        para = article["paragraphs"][0]
        context = para["context"]
        pid = f"p{i}"
        title = str(article.get("title") or "").strip() or None
        if unit == "paragraph":
            corpus.docs.append(Doc(id=pid, text=context, source=title))
            spans = [(0, len(context), pid)]
        else:
            spans = []
            for j, (start, sent) in enumerate(split_sentences(context)):
                sid = f"{pid}s{j}"
                corpus.docs.append(Doc(id=sid, text=sent, source=title))
                spans.append((start, start + len(sent), sid))
        for qa in para["qas"]:
            relevant = {sid for a in qa["answers"] for s, e, sid in spans
                        if s <= int(a["answer_start"]) < e}
            if relevant:
                corpus.queries.append(Query(qa["question"], relevant, "all", part=i))
    return [corpus]
