"""The read path of the note store: hybrid search (``pipeline``), what a reader may see
(``visibility``) and usage heat (``usage``)."""

from __future__ import annotations

from .pipeline import Searcher
from .result import SearchResult
from .usage import RecentSearches, UsageRecorder

__all__ = ["RecentSearches", "SearchResult", "Searcher", "UsageRecorder"]
