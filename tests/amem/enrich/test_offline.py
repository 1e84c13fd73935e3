"""The offline enricher's rules: category, note type, context, tags, links, evolution."""

from __future__ import annotations

import pytest

from amem.enrich import NoteView, OfflineEnricher, OfflineRules
from amem.errors import ValidationError

E = OfflineEnricher()


@pytest.mark.parametrize("text, category", [
    ("The deploy failed: the Docker container could not reach the Postgres database on the server.", "Technical"),
    ("Revenue grew 30% this quarter and the investor call is about the new pricing for enterprise customers.",
     "Business"),
    ("Caroline: My mom and my sister came over and we went hiking by the lake.", "Personal"),
    ("The milestone for the mobile app slipped; the new deadline for the release is March 3.", "Project"),
    ("The paper reports an ablation study: the baseline beats the new method on two of three benchmark datasets.",
     "Research"),
    ("User preference: the assistant should reply in British English; the config setting is in the system prompt.",
     "System"),
    ("The weather was grey and the tea was cold.", "General"),
    ("我们的项目上线时间推迟到下周五，需要和客户沟通新的截止日期。", "Project"),
    ("昨天和妈妈一起去爬山，山顶的风景非常漂亮。", "Personal"),
])
def test_category_by_lexicon(text: str, category: str) -> None:
    assert E.enrich(text).category == category


def test_english_enrichment_is_usable() -> None:
    r = E.enrich("Hey Mel! Good to see you!\nMelanie: Swamped with the kids. I just finished a painting of a "
                 "sunset over the lake at Tahoe.")
    assert r.enriched_by == "offline" and r.warnings == ()
    assert r.note_type == "memory"
    assert r.category == "Personal"
    assert "painting" in [k.lower() for k in r.keywords] and "Tahoe" in r.keywords
    assert "melanie" not in [k.lower() for k in r.keywords]
    assert r.context.startswith("Melanie: ")  # the greeting is skipped, the speaker kept
    assert all(t == t.lower() and " " not in t for t in r.tags)
    assert "hobbies" in r.topics and "hobbies" in r.tags


def test_knowledge_versus_memory() -> None:
    assert E.enrich("Python 3.11 added the tomllib module for reading TOML files.").note_type == "knowledge"
    assert E.enrich("We moved the standup to 10am after the outage.").note_type == "memory"
    assert E.enrich("The build broke on 2024-03-02 after the upgrade.").note_type == "memory"
    assert E.enrich("昨天我们讨论了数据库的迁移方案。").note_type == "memory"


def test_context_is_one_trimmed_sentence() -> None:
    long_sentence = "The Qdrant embedded engine " + " ".join(f"handles workload{i}" for i in range(60)) + "."
    r = OfflineEnricher(OfflineRules(context_chars=80)).enrich(long_sentence + " Second sentence about Rust.")
    assert len(r.context) <= 80 and r.context.endswith("…")
    assert r.context.startswith("The Qdrant embedded engine")
    assert "\n" not in r.context


def test_context_skips_greetings_that_only_name_someone() -> None:
    r = E.enrich("Maria: Hey John, I've been doing great lately. I've been involved in some charity work and "
                 "it's been really rewarding.")
    assert r.context == "Maria: I've been involved in some charity work and it's been really rewarding."
    assert "charity work" in r.keywords


def test_context_of_chinese_text() -> None:
    r = E.enrich("你好！我们的项目上线时间推迟到下周五。需要和客户沟通。")
    assert r.context == "我们的项目上线时间推迟到下周五。"


def test_topics_fall_back_to_keywords() -> None:
    r = E.enrich("The weather was grey and the tea was cold.")
    assert r.category == "General"
    assert r.topics and set(r.topics) <= set(r.tags)


@pytest.mark.parametrize("bad", ["", "  \n", None, 3])
def test_bad_text_is_rejected(bad: object) -> None:
    with pytest.raises(ValidationError) as info:
        E.enrich(bad)  # type: ignore[arg-type]
    assert info.value.field == "text"


NOTE = "Migrating the Qdrant collection to the e5 embedder changes the vector size."


def test_link_rule() -> None:
    candidates = [
        ("strong", "Completely different words here.", 0.80),           # cosine >= 0.75: linked
        ("shared", "The Qdrant snapshot restore is slow.", 0.50),        # shares "qdrant": linked
        ("plural", "Vector sizes differ between embedders.", 0.46),      # shares "embedder"/"vector": linked
        ("unrelated", "Lunch with Anna at the harbour.", 0.60),          # nothing shared: not linked
        ("common-only", "The change was good for everyone.", 0.55),   # only "change" (very common): not linked
        ("weak", "Qdrant again.", 0.44),                                 # below 0.45: not linked
    ]
    decision = E.verify_links(NOTE, candidates)
    assert decision == ["strong", "shared", "plural"]
    assert decision.decided_by == "offline" and decision.warnings == ()


def test_link_rule_for_chinese() -> None:
    cands = [("a", "数据库迁移需要停机两个小时。", 0.5), ("b", "周末去海边玩。", 0.5)]
    assert E.verify_links("数据库迁移推迟到下周。", cands) == ["a"]


@pytest.mark.parametrize("bad, field", [
    ([("id", "text")], "candidates[0]"),
    ([("", "text", 0.5)], "candidates[0]"),
    ([("a", "t", 0.5), ("b", "t", float("nan"))], "candidates[1]"),
    ("not a list", "candidates"),
])
def test_bad_candidates_are_rejected_naming_the_item(bad: object, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        E.verify_links(NOTE, bad)  # type: ignore[arg-type]
    assert info.value.field == field


def view(id: str, content: str, context: str = "", tags: tuple[str, ...] = (), keywords: tuple[str, ...] = ()
         ) -> NoteView:
    return NoteView(id=id, content=content, context=context, keywords=keywords, tags=tags)


def test_evolution_adds_shared_keywords_as_tags() -> None:
    new = view("new", NOTE, keywords=("Qdrant collection", "e5 embedder", "vector size"))
    nb = view("n1", "We run the Qdrant collection in embedded mode on the laptop.", context="Qdrant runs embedded.",
              tags=("qdrant", "embedded"))
    unrelated = view("n2", "Lunch with Anna at the harbour.", context="A lunch.", tags=("lunch",))
    decision = E.evolve(new, [nb, unrelated])
    assert decision.decided_by == "offline"
    assert len(decision) == 1  # the unrelated note is unchanged, so absent
    update = decision[0]
    assert update.id == "n1" and update.context == "Qdrant runs embedded."
    assert update.tags == ("qdrant", "embedded", "qdrant-collection")
    assert "qdrant-collection" in update.reason


def test_evolution_fills_an_empty_context_and_respects_limits() -> None:
    rules = OfflineRules(evolve_max=2, evolve_new_tags=1, evolve_max_tags=3)
    new = view("new", NOTE, keywords=("Qdrant", "vector size", "e5"))
    nbs = [view(f"n{i}", "Qdrant vector size e5 notes for the migration.", tags=("a",)) for i in range(3)]
    decision = OfflineEnricher(rules).evolve(new, nbs)
    assert [u.id for u in decision] == ["n0", "n1"]  # evolve_max
    assert decision[0].tags == ("a", "qdrant")  # one new tag per evolution
    assert decision[0].context.startswith("Qdrant vector size")
    full = view("full", "Qdrant vector size", context="c", tags=("x", "y", "z"))
    assert OfflineEnricher(rules).evolve(new, [full]) == []  # already at evolve_max_tags


def test_evolution_skips_the_note_itself_and_checks_types() -> None:
    new = view("same", NOTE, keywords=("Qdrant",))
    assert E.evolve(new, [view("same", NOTE)]) == []
    with pytest.raises(ValidationError) as info:
        E.evolve(new, [("n", "text")])  # type: ignore[list-item]
    assert info.value.field == "neighbours[0]"


def test_offline_rules_validate() -> None:
    with pytest.raises(ValueError, match="link_min"):
        OfflineRules(link_min=0.9, link_strong=0.8)
    with pytest.raises(ValueError, match="max_keywords"):
        OfflineRules(max_keywords=0)
