"""The context: the small ranked prefill of a user's memory for an agent's prompt.

Only active facts, preferences and notes at or above ``[context] min_confidence`` take part,
ranked by the retention score (:mod:`memkeeper.scoring`), and rendered as the text block seed
000 injects into its system prompt. Building a context marks nothing as used — only recall
does — so prefilled entries still expire when nobody actually needs them.
"""

from __future__ import annotations

from collections.abc import Sequence

from memkeeper.records import Context, Memory
from memkeeper.scoring import rank_key, retention_score
from memkeeper.storage.changelog import image_of
from memkeeper.store.core import StoreCore


def context(core: StoreCore, user_id: str, *, namespace: str, limit: int | None) -> Context:
    """The user's best active entries and notes, at most ``limit`` (default from config)."""
    user_id, namespace = core.owner(user_id, namespace)
    limit = core.limit(limit if limit is not None else core.config.context.limit)
    now = core.now()
    with core.storage.lock:
        rows = list(
            core.storage.hot.query(
                "SELECT * FROM memories WHERE user_id = ? AND namespace = ?"
                " AND kind IN ('fact', 'preference', 'note') AND state = 'active'"
                " AND confidence >= ?",
                [user_id, namespace, core.config.context.min_confidence],
            )
        )
    memories = [Memory.from_image(image_of(row)) for row in rows]
    scored = [(m, retention_score(m, now, core.config.scoring)) for m in memories]
    scored.sort(key=lambda pair: rank_key(*pair), reverse=True)
    chosen = [memory for memory, _ in scored[:limit]]
    return Context(memories=chosen, text=prompt_text(chosen))


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
