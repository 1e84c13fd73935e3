"""``update(tags=...)``: how a user takes back a tag a default added (a re-import's tag join,
``amem.write.tagjoin``), recorded like every edit and embedded where tags are embedded."""

from __future__ import annotations

import numpy as np
import pytest

from amem import MemoryStore
from amem.embed.hashing import HashingEmbedder
from amem.errors import ValidationError


def test_new_tags_replace_the_old_and_the_history_keeps_them() -> None:
    with MemoryStore(":memory:", embedder=HashingEmbedder(64), agent_id="a") as store:
        given = store.add("Alice booked the Lisbon flight", tags=["travel"])
        # the same text again with another tag: the default joins it to the stored note
        again = store.add("Alice booked the Lisbon flight", tags=["work"])
        assert again.status == "deduplicated" and store.get(given.id).tags == ["travel", "work"]
        done = store.update(given.id, tags=["travel"])  # the user takes the joined tag back
        assert (done.status, done.changed) == ("updated", ["tags"])
        note = store.get(given.id)
        assert note.tags == ["travel"]
        assert note.evolution_history[-1]["old_tags"] == ["travel", "work"]
        # given tags are what the note embeds: its vector is the new embedded text's
        stored = store.index.load(given.id, "a", with_vector=True)[1]
        fresh = store.index.embed_passages([note.embed_text()])[0]
        assert stored is not None and np.allclose(stored, fresh, atol=1e-5)
        assert "work" not in note.embed_text()
        assert store.update(given.id, tags=["travel"]).status == "unchanged"
        assert store.update(given.id, tags=[]).changed == ["tags"] and store.get(given.id).tags == []
        with pytest.raises(ValidationError) as bad:
            store.update(given.id, tags="travel")  # a string is not a list of tags
        assert bad.value.field == "tags"
