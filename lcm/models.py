"""The data classes lcm returns. Every one has ``to_dict()`` giving plain JSON-friendly values."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "AssembledContext", "AssembledItem", "BucketReport", "CompactionResult", "Conversation", "DoctorIssue",
    "DoctorReport", "CleanReport", "ExpandQueryResult", "ExpandResult", "ExpandedMessage",
    "ExpandedSummary", "FileDescription", "MessageDescription", "GrepHit", "GrepResult", "IngestResult",
    "MaintenanceResult", "NewContextResult", "ResetResult", "RetentionResult", "StatusReport", "Summary",
    "SummaryDescription", "EmbedReport", "EmbeddingStatus",
]  # fmt: skip


class _Dict:
    # Declared, not set: every subclass is a @dataclass, which fills it in.
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    #: fields left out of ``to_dict`` while None (a message's speaker and spelled role, which
    #: most messages have none of: an item is not padded with nulls a host may pass on)
    _OMIT_NONE: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key in self._OMIT_NONE:
            if out.get(key, "") is None:
                del out[key]
        return out


#: a message's own words about itself, kept from ingest (migration ``0014_message_speakers``)
SPEAKER_FIELDS = ("name", "source_role")


@dataclass(frozen=True)
class Conversation(_Dict):
    id: int
    session_key: str | None
    session_id: str | None
    active: bool
    archived_at: str | None
    archive_cause: str | None
    title: str | None
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class IngestResult(_Dict):
    """What one ``ingest`` call stored. ``ignored``/``stateless`` mean nothing was written."""

    conversation_id: int | None
    stored: int
    skipped_duplicates: int
    message_ids: list[int] = field(default_factory=list)
    file_ids: list[str] = field(default_factory=list)
    ignored: bool = False
    stateless: bool = False
    new_conversation: bool = False
    archived_conversation_id: int | None = None


@dataclass(frozen=True)
class ResetResult(_Dict):
    archived_conversation_id: int | None
    conversation_id: int
    cause: str


@dataclass(frozen=True)
class NewContextResult(_Dict):
    """``/new``: what left the active context; the conversation and its history stay."""

    conversation_id: int | None
    pruned_items: int
    pruned_tokens: int


@dataclass(frozen=True)
class Summary(_Dict):
    id: str
    conversation_id: int
    kind: str
    depth: int
    content: str
    token_count: int
    earliest_at: str
    latest_at: str
    descendant_count: int
    descendant_token_count: int
    source_message_token_count: int
    model: str
    status: str
    created_at: str


@dataclass(frozen=True)
class CompactionResult(_Dict):
    """One ``compact`` call. ``stopped`` says why a sweep ended early ('' when it finished)."""

    conversation_id: int | None
    ran: bool
    reason: str
    tokens_before: int
    tokens_after: int
    leaf_summaries: list[str] = field(default_factory=list)
    condensed_summaries: list[str] = field(default_factory=list)
    fallback_summaries: list[str] = field(default_factory=list)
    truncated_summaries: list[str] = field(default_factory=list)
    iterations: int = 0
    stopped: str = ""
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AssembledItem(_Dict):
    type: str  # "summary" | "message"
    id: str  # "sum_..." or the message id as text
    role: str
    content: str
    token_count: int
    #: the host's speaker or tool name of a message, and its role as the host spelled it
    #: ("developer" where ``role`` says system); absent when the host gave none
    name: str | None = None
    source_role: str | None = None
    _OMIT_NONE: ClassVar[tuple[str, ...]] = SPEAKER_FIELDS


@dataclass(frozen=True)
class AssembledContext(_Dict):
    """The ordered context for the model. ``prefix_hash`` changes only when the prefix does."""

    conversation_id: int | None
    token_budget: int
    total_tokens: int
    items: list[AssembledItem]
    summary_count: int
    tail_count: int
    dropped_count: int
    prefix_hash: str
    compacted: bool = False
    debt_recorded: bool = False
    warnings: list[str] = field(default_factory=list)
    #: the newest message alone is larger than the budget: it is kept (a turn cannot be
    #: answered without it), so ``total_tokens`` passes ``token_budget``; a host that must
    #: stay under its window checks this (a warning says the same)
    over_budget: bool = False

    @property
    def messages(self) -> list[dict[str, str]]:
        """Chat-API shaped messages (summaries are passed as user-role tagged blocks)."""
        return [{"role": it.role, "content": it.content} for it in self.items]

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["messages"] = self.messages
        return out


@dataclass(frozen=True)
class GrepHit(_Dict):
    _OMIT_NONE: ClassVar[tuple[str, ...]] = ("name",)

    kind: str  # "message" | "summary"
    id: str
    conversation_id: int
    created_at: str
    snippet: str
    score: float
    role: str | None = None
    depth: int | None = None
    summary_kind: str | None = None  # "leaf" | "condensed" for summary hits
    line: int | None = None  # file hits: 1-based line of the match
    byte_offset: int | None = None  # file hits: UTF-8 byte offset of the match in the file
    match_text: str | None = None  # file hits: the text that matched (the snippet is its line)
    name: str | None = None  # message hits: the speaker the host named (left out when none)


@dataclass(frozen=True)
class GrepResult(_Dict):
    pattern: str
    mode: str
    scope: str
    sort: str
    hits: list[GrepHit]
    truncated: bool = False
    scanned: int = 0
    conversation_ids: list[int] | None = None
    warnings: list[str] = field(default_factory=list)
    #: semantic/hybrid: in-scope messages and summaries without a vector of the current model
    #: (semantic search could not see them; hybrid still found them by full text)
    not_embedded: int | None = None


@dataclass(frozen=True)
class SummaryDescription(_Dict):
    summary: Summary
    #: the summaries this one was condensed from (lower depth): the links recall walks down to
    #: the source messages, lossless-claw's ``parentIds`` (its summary_parents table's meaning)
    parent_ids: list[str]
    #: the summaries condensed from this one (higher depth), lossless-claw's ``childIds``
    child_ids: list[str]
    source_message_ids: list[int]
    source_messages_truncated: bool
    in_context: bool
    kind: str = "summary"
    file_ids: list[str] = field(default_factory=list)  # large files stored from its source messages


@dataclass(frozen=True)
class FileDescription(_Dict):
    id: str
    conversation_id: int
    message_id: int | None
    file_name: str  # lossless-claw's names: fileName, mimeType, byteSize
    mime_type: str
    byte_size: int
    token_count: int
    exploration_summary: str
    created_at: str
    slice_offset: int
    slice_text: str
    slice_truncated: bool
    kind: str = "file"
    storage_name: str = ""  # the file's name in the large-files directory
    #: with ``expand_file``: the file's first ``expandFileMaxBytes`` bytes as text, and whether
    #: the file goes on past them (None without ``expand_file``)
    content: str | None = None
    content_truncated: bool | None = None


@dataclass(frozen=True)
class ExpandedSummary(_Dict):
    id: str
    kind: str
    depth: int
    content: str
    token_count: int
    level: int  # 0 for a seed, 1 for its children, ...


@dataclass(frozen=True)
class ExpandedMessage(_Dict):
    id: int
    conversation_id: int
    role: str
    content: str
    created_at: str
    token_count: int
    via: str  # the leaf summary it was reached through ('' when found directly)
    name: str | None = None  # as on AssembledItem
    source_role: str | None = None
    _OMIT_NONE: ClassVar[tuple[str, ...]] = SPEAKER_FIELDS


@dataclass(frozen=True)
class ExpandResult(_Dict):
    seeds: list[str]
    summaries: list[ExpandedSummary]
    messages: list[ExpandedMessage]
    total_tokens: int
    truncated: bool
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BucketReport(_Dict):
    """One conversation bucket of a delegated ``expand_query`` (``conversationBreakdown``)."""

    conversation_id: int
    #: "success", "failed" (an error or the shared deadline) or "skipped" (never started)
    status: str
    #: the summaries the bucket started from (its seeds, best first)
    summary_ids: list[str]
    #: where it was when it ended: "queued", "expand", "answer", or the sub-agent's tool
    phase: str
    elapsed_ms: int
    #: source tokens this bucket drew from the shared cap
    tokens: int
    expanded_summary_count: int = 0
    cited_ids: list[str] = field(default_factory=list)
    truncated: bool = False
    error_code: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ExpandQueryResult(_Dict):
    answer: str
    cited_ids: list[str]
    expanded_summary_count: int
    total_source_tokens: int
    truncated: bool
    method: str  # "llm" | "extractive" (no LLM configured)
    warnings: list[str] = field(default_factory=list)
    source_conversation_ids: list[int] = field(default_factory=list)
    #: one entry per conversation bucket, ranked (expanded, failed and skipped alike)
    conversation_breakdown: list[BucketReport] = field(default_factory=list)
    #: set only when no bucket succeeded: the readable error and its code
    error: str | None = None
    error_code: str | None = None


@dataclass(frozen=True)
class StatusReport(_Dict):
    path: str
    size_bytes: int
    conversations: int
    active_conversations: int
    archived_conversations: int
    messages: int
    message_tokens: int
    summaries: int
    summaries_by_depth: dict[str, int]
    context_tokens: int
    compression_ratio: float
    fallback_summaries: int
    truncated_summaries: int
    broken_summaries: int
    large_files: int
    large_file_bytes: int
    pending_debt: int
    migrations: list[str]
    #: where large messages are stored as files; None: this host has none (a PostgreSQL store
    #: without ``largeFilesDir``, which refuses large messages rather than keep them in a
    #: temporary directory other hosts cannot read)
    large_files_dir: str | None
    #: semantic recall: vectors stored, and the items still to embed (``amem lcm embed``)
    embedding: EmbeddingStatus | None = None
    #: the version of the installed distribution that ships lcm (amem)
    version: str = ""
    #: the newest failed summary, compaction, expansion or embedding run (kept across restarts)
    last_failure: FailureRecord | None = None
    #: the work still owed: compaction debt by state, and the items still to embed
    debt: DebtStatus | None = None
    #: lossless-claw config keys accepted but not acted on (warned once at load)
    ignored_keys: list[str] = field(default_factory=list)
    #: ``enabled`` (config): whether ingest stores anything at all
    enabled: bool = True
    #: the engine of this store ("sqlite" or "postgresql")
    engine: str = "sqlite"
    #: raw message tokens that some summary covers (``summary_messages``), and their share of
    #: every message token: how much of the history compaction has reached
    summarized_source_tokens: int = 0
    summarized_coverage: float = 0.0
    #: ``compression_ratio`` as the reference writes it: context tokens to raw tokens, ``1:N``
    compression: str = "1:1"
    #: the event log this store writes (ingest, compaction decisions, failures); None: none is
    #: written (``independentLogFile.enabled`` off, or no data directory to put it in and no
    #: ``independentLogFile.file`` / ``LCM_LOG_FILE``, as on PostgreSQL)
    event_log: str | None = None


@dataclass(frozen=True)
class FailureRecord(_Dict):
    """One failure of lcm's own work (``lcm.failures``): when, what, why, and which conversation."""

    at: str
    kind: str  # summary | compaction | expansion | embedding
    reason: str
    conversation_id: int | None = None


@dataclass(frozen=True)
class DebtStatus(_Dict):
    """Work owed: conversations waiting for deferred compaction, by state, embedding and trigram debt."""

    compaction_pending: int
    compaction_running: int  # being paid now (or its process died mid-run: maintenance retries it)
    compaction_failed: int  # the last attempt raised; maintenance retries it
    embedding: int | None = None  # items semantic recall cannot see yet; None: no embedder recorded
    trigram: int = 0  # messages not yet in the trigram index (lcm.trigram); grep reads them directly


@dataclass(frozen=True)
class DoctorIssue(_Dict):
    check: str
    severity: str  # "error" (broken) | "warning" (degraded but consistent) | "info" (worth knowing)
    id: str
    detail: str
    conversation_id: int | None = None


@dataclass(frozen=True)
class DoctorReport(_Dict):
    """``ok`` is True when nothing is broken; fallback/truncated summaries are warnings."""

    ok: bool
    checks: dict[str, int]
    issues: list[DoctorIssue]
    issues_truncated: bool = False
    #: the conversations most in need of attention, worst first (``lcm.health``)
    worst_conversations: list[ConversationHealth] = field(default_factory=list)


@dataclass(frozen=True)
class ConversationHealth(_Dict):
    """One conversation's severity ``score`` and what makes it up (``lcm.health.score``)."""

    conversation_id: int
    session_key: str | None
    score: int
    errors: int  # doctor findings in this conversation, by severity
    warnings: int
    infos: int
    failures: int  # recorded failures (lcm.failures) naming it
    debt: str | None  # its compaction debt's state (pending | running | failed), None: none owed
    context_tokens: int
    messages: int
    reasons: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CleanReport(_Dict):
    """Candidates a person may choose to delete; nothing is changed but ``removed_files``."""

    archived_subagent: list[dict[str, Any]]
    cron: list[dict[str, Any]]
    null_key: list[dict[str, Any]]
    empty_archived: list[dict[str, Any]]
    orphan_files: list[str]
    missing_files: list[str]
    totals: dict[str, int]
    #: ``.tmp`` files of large-file writes killed before their rename (``LargeFileStore.leftovers``)
    leftover_files: list[str] = field(default_factory=list)
    #: of those, the ones deleted (``doctor_clean(apply=True)``); the only thing it deletes
    removed_files: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RetentionResult(_Dict):
    dry_run: bool
    deleted_conversations: list[int]
    deleted_messages: int
    deleted_files: int
    size_before: int
    size_after: int
    reasons: dict[str, str]


@dataclass(frozen=True)
class MaintenanceResult(_Dict):
    compactions: list[CompactionResult]
    failures: dict[str, str]
    retention: RetentionResult | None
    embedding: EmbedReport | None = None  # None: no embedder configured


@dataclass(frozen=True)
class MessageDescription(_Dict):
    id: str
    conversation_id: int
    seq: int
    role: str
    content: str
    token_count: int
    created_at: str
    file_id: str | None
    summary_ids: list[str]  # leaf summaries covering it
    in_context: bool
    kind: str = "message"
    name: str | None = None  # as on AssembledItem
    source_role: str | None = None
    _OMIT_NONE: ClassVar[tuple[str, ...]] = SPEAKER_FIELDS


@dataclass(frozen=True)
class EmbeddingStatus(_Dict):
    """Semantic recall's state: the recorded embedder and what is still to embed (the debt)."""

    model_id: str | None  # None: no embedder has been configured for this store yet
    dim: int | None
    vectors: int  # messages and summaries with a vector of ``model_id``
    pending_messages: int
    pending_summaries: int
    debt: int  # pending_messages + pending_summaries: what semantic search cannot see yet
    stale_vectors: int  # vectors of an earlier model, replaced as the debt is paid
    previous_model_id: str | None = None
    failed: int = 0  # items the embedder could not encode: skipped, retried after a model change
    #: the embedder the store was opened with when it is not ``model_id``'s and no switch was
    #: asked (``LcmStore(switch_embedder=True)``): semantic recall and embedding are refused
    given_model_id: str | None = None


@dataclass(frozen=True)
class EmbedReport(_Dict):
    """One ``embed_pending`` run: what it embedded, what is left, and why it stopped."""

    model_id: str
    embedded_messages: int
    embedded_summaries: int
    batches: int
    seconds: float
    pending: int  # left after this run
    stopped: str | None = None  # "limit" | "deadline" | None (nothing left)
    failed: int = 0  # items the embedder failed on alone (marked, so they block nothing)
