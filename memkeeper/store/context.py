"""The context: the small ranked prefill of a user's memory for an agent's prompt.

Following seed 003 §3.3, three sections:

* the slots: active facts, preferences and notes of the namespace at or above ``[context]
  min_confidence``, ranked by the retention score (:mod:`memkeeper.scoring`) — the text block
  seed 000 injects into its system prompt. A project's slots include the user's profile
  (the default namespace: a name, a role), ranked with the project's own entries; a
  project's entry shadows a profile entry of the same kind and key. The slots mark nothing
  as used, so prefilled entries still expire when nobody actually needs them;
* with a ``query``: the top ``[search] limit`` entries relevant to it
  (:mod:`memkeeper.store.search`, which also looks in the user's profile, the default
  namespace) that are not already in the slots and are at or above ``[context]
  min_confidence`` too (the prompt holds no entry the slots' threshold keeps out) — these
  were found, so they are marked used;
* the namespace's ``[search] context_episodes`` most recent episodes, in time order.

With retrieval switched off (``[search] enabled``, ``MEMKEEPER_RETRIEVAL=off``) the context is
empty.
"""

from __future__ import annotations

from collections.abc import Sequence

from memkeeper.records import Context, Episode, Memory, SearchHit
from memkeeper.scoring import rank_key, retention_score
from memkeeper.storage import memory_reads
from memkeeper.storage.changelog import image_of
from memkeeper.store import conversations, search, semantic
from memkeeper.store.core import StoreCore


def context(
    core: StoreCore, user_id: str, *, namespace: str, limit: int | None, query: str | None = None
) -> Context:
    """The slots (the user's best active entries and notes, at most ``limit``, default from
    config), the entries relevant to ``query`` not among them (marked used), and the
    namespace's most recent episodes; nothing at all when retrieval is switched off."""
    user_id, namespace = core.owner(user_id, namespace)
    if not semantic.retrieval_enabled(core.config):
        return Context(memories=[], text="")
    chosen = _slots(core, user_id, namespace, limit)
    relevant = []
    if query is not None and query.strip():
        relevant = search.search(
            core,
            user_id,
            query,
            namespace=namespace,
            kinds=None,
            limit=None,
            include_cold=False,
            exclude={m.id for m in chosen},
            min_confidence=core.config.context.min_confidence,
        )
    count = core.config.search.context_episodes
    episodes = (
        conversations.episodes(core, user_id, namespace=namespace, limit=count) if count else []
    )
    text = "\n\n".join(
        part
        for part in (prompt_text(chosen), relevant_text(relevant), episodes_text(episodes))
        if part
    )
    return Context(memories=chosen, text=text, relevant=relevant, episodes=episodes)


def _slots(core: StoreCore, user_id: str, namespace: str, limit: int | None) -> list[Memory]:
    limit = core.limit(limit if limit is not None else core.config.context.limit)
    now = core.now()
    # The profile (namespace '') applies to every project: one query for both namespaces.
    with core.storage.lock:
        rows = memory_reads.active_profile_and_project(
            core.storage.hot, user_id, namespace, core.config.context.min_confidence
        )
    memories = _shadowed([Memory.from_image(image_of(row)) for row in rows], namespace)
    scored = [(m, retention_score(m, now, core.config.scoring)) for m in memories]
    scored.sort(key=lambda pair: rank_key(*pair), reverse=True)
    return [memory for memory, _ in scored[:limit]]


def _shadowed(memories: list[Memory], namespace: str) -> list[Memory]:
    """``memories`` without the profile entries a project entry of the same kind and key
    overrides (the project's report_format wins over the profile's)."""
    if not namespace:
        return memories
    own = {(m.kind, m.key) for m in memories if m.namespace == namespace and m.key}
    return [m for m in memories if m.namespace == namespace or (m.kind, m.key) not in own]


def prompt_text(memories: Sequence[Memory]) -> str:
    """Render memories as the prompt block seed 000 injects into the system prompt."""
    if not memories:
        return ""
    sections = []
    facts = [m for m in memories if m.kind == "fact"]
    preferences = [m for m in memories if m.kind == "preference"]
    notes = sorted((m for m in memories if m.kind == "note"), key=lambda m: m.created_at)
    if facts:
        sections.append("Known facts:\n" + "\n".join(f"- {m.key}: {m.value}" for m in facts))
    if preferences:
        sections.append("Preferences:\n" + "\n".join(f"- {m.key}: {m.value}" for m in preferences))
    if notes:
        sections.append(
            "Notes:\n" + "\n".join(f"- [{m.created_at:%Y-%m-%d %H:%M}] {m.value}" for m in notes)
        )
    return "\n\n".join(sections)


def relevant_text(hits: Sequence[SearchHit]) -> str:
    """The section of entries relevant to the query, best first."""
    if not hits:
        return ""
    lines = [
        f"- {h.memory.key}: {h.memory.value}" if h.memory.key else f"- {h.memory.value}"
        for h in hits
    ]
    return "Relevant to this message:\n" + "\n".join(lines)


def episodes_text(episodes: Sequence[Episode]) -> str:
    """The section of the namespace's recent episodes, oldest first (a timeline)."""
    if not episodes:
        return ""
    lines = []
    for e in episodes:
        line = f"- [{e.created_at:%Y-%m-%d %H:%M}] {e.task_name} ({e.status})"
        details = [
            f"{label}: {text}"
            for label, text in (
                ("input", e.input_summary),
                ("output", e.output_summary),
                ("feedback", e.user_feedback),
            )
            if text
        ]
        lines.append(line + (" — " + "; ".join(details) if details else ""))
    return "Recent episodes:\n" + "\n".join(lines)
