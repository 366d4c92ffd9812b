"""What a forget reaches beyond the entries it names: the texts memkeeper derived from them.

memkeeper derives texts from what agents store: summaries of conversations, facts extracted
from them, notes merged by the LLM, duplicates merged into one survivor. A forget that erased
only the entries it names would leave the erased value in all of those. :func:`reach_of`
hashes the erased values and :func:`plan` works out, for one user, everything a forget
reaches (reads only, so a dry run shows it); :mod:`memkeeper.storage.redaction` writes it
inside the erasure's transaction.

What a forget of a fact or preference reaches (in every namespace of the user for a value of
their profile, in its own namespace for a project's; ``docs/concepts/forget.md`` has the
table, with why):

* messages carrying an erased value (:mod:`memkeeper.storage.erased_values`: the same words,
  in any case or Unicode form) get ``[erased]`` in its place; one an erased fact was
  extracted from in other words is replaced whole;
* derived entries are erased with their history: a summary that covered a carrier message,
  an entry extracted from one, a derived entry carrying the value, another fact holding it,
  a note merged from an erased note, every member of a group of duplicates with an erased
  member;
* an erased summary's messages are unsummarized again and the latest earlier summary of the
  session is current again: the next summarize run rebuilds from what remains;
* notes an agent wrote, change-log images (``details.redacted_at``) and episodes that carry
  the value are redacted in place.

A forget of one entry by id reaches what was derived from it and the earlier texts folded
into it; its facts and messages stay (the messages summarized, so it is not written again).
A forget of a namespace or a user takes everything in its scope: nothing more to reach.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memkeeper.storage import erased_values
from memkeeper.storage.changelog import image_of
from memkeeper.storage.erased_values import REDACTED, Matcher, redact

_RANGE = re.compile(r"^summary:session=(?P<session>.*);messages=(?P<first>\d+)-(?P<last>\d+)$")
_MERGE = re.compile(r"^merge:(?P<a>[^+]+)\+(?P<b>.+)$")
_EXTRACTED = "session:"
EPISODE_TEXTS = ("task_name", "input_summary", "output_summary", "user_feedback")


@dataclass
class Reach:
    """Everything one forget reaches beyond the entries it names (see the module doc)."""

    user_id: str = ""
    derived: dict[str, str] = field(default_factory=dict)  # id -> why it is erased
    entries: dict[str, str] = field(default_factory=dict)  # hot id -> value, redacted
    cold_entries: dict[str, str] = field(default_factory=dict)  # cold id -> value, redacted
    messages: dict[int, str] = field(default_factory=dict)  # id -> content, redacted
    unmark: set[str] = field(default_factory=set)  # summaries whose messages are redone
    revive: set[str] = field(default_factory=set)  # earlier summaries current again
    detach: set[str] = field(default_factory=set)  # summaries whose messages stay done
    # change id -> its redacted columns, and ``details`` as read (the write adds the time)
    changes: dict[int, dict[str, str | None]] = field(default_factory=dict)
    episodes: dict[int, dict[str, str]] = field(default_factory=dict)
    taken: set[str] = field(default_factory=set)  # the erased spans' own texts (the scrub's)
    images: dict[str, dict[str, Any]] = field(default_factory=dict)  # of every entry read

    def counts(self) -> dict[str, int]:
        """How many of each kind (ids only: a preview shows these, never a text)."""
        return {
            "derived_erased": len(self.derived),
            "entries_redacted": len(self.entries) + len(self.cold_entries),
            "messages_redacted": len(self.messages),
            "summaries_to_rebuild": len(self.unmark),
            "summaries_current_again": len(self.revive),
            "change_rows_redacted": len(self.changes),
            "episodes_redacted": len(self.episodes),
        }


def _summary_range(image: Mapping[str, Any]) -> tuple[str, int, int] | None:
    if image["kind"] != "note":
        return None
    found = _RANGE.match(image.get("source") or "")
    if not found:
        return None
    return found["session"], int(found["first"]), int(found["last"])


def _is_derived(image: Mapping[str, Any]) -> bool:
    source = image.get("source") or ""
    return bool(_summary_range(image) or _MERGE.match(source) or source.startswith(_EXTRACTED))


def _details(row: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(row["details"]) if row.get("details") else {}


def _rows(db: Any, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    return [dict(row) for row in db.query(sql, params)]


def plan(
    storage: Any,
    user_id: str,
    primary: Iterable[str],
    matcher: Matcher | None,
    *,
    by_id: bool,
    namespace: str | None = None,
) -> Reach:
    """What erasing ``primary`` (ids of one user's entries) reaches; reads only.

    ``matcher`` finds the erased values (None: the forget erased no value worth looking for,
    a note by id say). ``by_id``: a forget of one entry by id (a summary's messages then stay
    summarized). ``namespace``: the one namespace reached (None: every namespace of the
    user, for a value of their profile).
    """
    hot, cold = storage.hot, storage.cold(create=False)
    reach = Reach(user_id=user_id)
    erased = set(primary)
    owner, params = "user_id = ?", [user_id]
    if namespace is not None:
        owner, params = "user_id = ? AND namespace = ?", [user_id, namespace]
    hot_rows = _rows(hot, f"SELECT * FROM memories WHERE {owner}", params)
    entries = {row["id"]: image_of(row) for row in hot_rows}
    cold_ids: set[str] = set()
    if cold is not None:
        for row in _rows(cold, f"SELECT * FROM cold_memories WHERE {owner}", params):
            entries[row["id"]] = image_of(row)
            cold_ids.add(row["id"])
    changes = _rows(
        hot,
        "SELECT id, memory_id, action, source, before, after, details FROM changes"
        f" WHERE {owner} AND memory_id IS NOT NULL ORDER BY id",
        params,
    )
    # Entries no table holds any more but the log still does (an erasure interrupted between
    # its two files' commits, say): their last image stands for them, so that what was
    # derived from them is found and their rows are erased; there is nothing to redact.
    log_only: set[str] = set()
    for row in changes:
        if row["memory_id"] not in entries or row["memory_id"] in log_only:
            image = row["after"] or row["before"]
            if image:
                entries[row["memory_id"]] = json.loads(image)
                log_only.add(row["memory_id"])
    reach.images = entries
    messages = _rows(
        hot,
        f"SELECT id, namespace, session_id, content, summary_id FROM messages WHERE {owner}",
        params,
    )
    sources, groups = _provenance(changes)
    # Messages: spans of erased values; the sources of an erased extracted fact, whole.
    carriers: dict[int, tuple[str, str]] = {}
    whole: set[int] = set()  # the messages an erased fact or preference was extracted from
    for memory_id in erased:
        if (entries.get(memory_id) or {}).get("kind", "fact") != "note":
            whole |= sources.get(memory_id, set())
    for message in messages:
        spans = matcher.spans(message["content"]) if matcher else []
        if spans:
            reach.messages[message["id"]], taken = redact(message["content"], spans)
            reach.taken.update(taken)
        elif message["id"] in whole and message["content"] != REDACTED:
            reach.messages[message["id"]] = REDACTED
            reach.taken.add(message["content"])
        else:
            continue
        carriers[message["id"]] = (message["namespace"], message["session_id"])

    def erase(memory_id: str, why: str) -> bool:
        if memory_id in erased or memory_id not in entries:
            return False
        erased.add(memory_id)
        reach.derived[memory_id] = why
        return True

    if by_id:  # the earlier texts folded into it: an LLM merge's notes, a summary's summaries
        pending = list(erased)
        while pending:
            found = _MERGE.match((entries.get(pending.pop()) or {}).get("source") or "")
            for parent in (found["a"], found["b"]) if found else ():
                if erase(parent, "a note merged into the erased one"):
                    pending.append(parent)
        for memory_id in list(erased):
            image = entries.get(memory_id)
            found = _summary_range(image) if image else None
            if found is None:
                continue
            session, first, last = found
            for other, other_image in entries.items():
                span = _summary_range(other_image)
                if span and span[0] == session and other_image["namespace"] == image["namespace"]:
                    if span[1] >= first and span[2] <= last:
                        erase(other, "an earlier summary folded into the erased one")
                    elif span[1] <= first and span[2] >= last:
                        erase(other, "a later summary that folded in the erased one")
    chosen = set(erased)  # the entry forgotten by id, and the summaries folded with it
    for memory_id, image in entries.items():
        if memory_id in erased:
            continue
        key_spans = matcher.spans(image["key"]) if matcher else []
        value_spans = matcher.spans(image["value"]) if matcher else []
        span = _summary_range(image)
        if span and any(
            place == (image["namespace"], span[0]) and span[1] <= message_id <= span[2]
            for message_id, place in carriers.items()
        ):
            erase(memory_id, "a summary of messages that carried an erased value")
        elif sources.get(memory_id, set()) & carriers.keys():
            erase(memory_id, "extracted from a message that carried an erased value")
        elif key_spans or (value_spans and _is_derived(image)):
            erase(memory_id, "derived from, or keyed by, an erased value")
        elif value_spans and image["kind"] != "note":
            erase(memory_id, "another fact or preference with an erased value")
        elif value_spans and memory_id not in log_only:
            redacted, taken = redact(image["value"], value_spans)
            (reach.cold_entries if memory_id in cold_ids else reach.entries)[memory_id] = redacted
            reach.taken.update(taken)
    changed = True
    while changed:  # merged notes and groups of duplicates, until nothing more is reached
        changed = False
        for memory_id, image in entries.items():
            found = _MERGE.match(image.get("source") or "")
            if found and {found["a"], found["b"]} & erased:
                changed |= erase(memory_id, "merged from an erased note")
        for memory_id in list(erased):
            for member in groups.get(memory_id, ()):
                changed |= erase(member, "merged with an erased duplicate")
    for memory_id in reach.derived:
        reach.entries.pop(memory_id, None)
        reach.cold_entries.pop(memory_id, None)
    summaries = {i for i in erased if entries.get(i) and _summary_range(entries[i])}
    # A summary forgotten by id keeps its messages summarized (so it is not written again);
    # one erased for carrying a value has them summarized again, without it.
    reach.detach = summaries & chosen if by_id else set()
    reach.unmark = summaries - reach.detach
    reach.revive = _earlier_summaries(entries, erased, reach.unmark, cold_ids | log_only)
    # The change log: images of kept entries that carry an erased value.
    for row in changes:
        if row["memory_id"] in erased or matcher is None:
            continue
        redone = _redacted_row(row, matcher, reach)
        if redone is not None:
            reach.changes[row["id"]] = {**redone, "details": row["details"]}
    if matcher is not None:
        _redacted_episodes(hot, owner, params, matcher, reach)
    return reach


def _earlier_summaries(
    entries: Mapping[str, Mapping[str, Any]],
    erased: set[str],
    rebuilt: set[str],
    elsewhere: set[str],
) -> set[str]:
    """For each session whose current summary is erased and rebuilt: the latest summary of it
    that survives (superseded, in the hot file), made current again, so that the rebuild
    folds it in rather than starting from the unmarked messages alone."""
    sessions = {
        (entries[i]["namespace"], found[0])
        for i in rebuilt
        if entries[i]["state"] == "active" and (found := _summary_range(entries[i]))
    }
    revived = set()
    for namespace, session in sessions:
        earlier = [
            (found[2], memory_id)
            for memory_id, image in entries.items()
            if memory_id not in erased
            and memory_id not in elsewhere
            and image["state"] == "superseded"
            and image["namespace"] == namespace
            and (found := _summary_range(image))
            and found[0] == session
        ]
        if earlier:
            revived.add(max(earlier)[1])
    return revived


def _provenance(
    changes: Iterable[Mapping[str, Any]],
) -> tuple[dict[str, set[int]], dict[str, set[str]]]:
    """From the change log: the message ids each entry was extracted from, and for each
    entry the group of duplicates merged with it (an LLM merge's notes are the new note's
    sources, found by its ``merge:`` source, not a group)."""
    sources: dict[str, set[int]] = {}
    groups: dict[str, set[str]] = {}
    for row in changes:
        details = _details(row)
        ids = details.get("message_ids")
        if ids and not row["action"].startswith("summar"):
            sources.setdefault(row["memory_id"], set()).update(int(i) for i in ids)
        if details.get("matched_by") == "llm" or row["action"] not in ("merge", "supersede"):
            continue
        members = set(details.get("merged") or ())
        if details.get("merged_into"):
            members.add(details["merged_into"])
        if members:
            members.add(row["memory_id"])
            for member in members:
                groups.setdefault(member, set()).update(members)
    return sources, groups


def _redacted_episodes(
    hot: Any, owner: str, params: list[Any], matcher: Matcher, reach: Reach
) -> None:
    for episode in _rows(
        hot, f"SELECT id, {', '.join(EPISODE_TEXTS)} FROM episodes WHERE {owner}", params
    ):
        fixed = {}
        for column in EPISODE_TEXTS:
            spans = matcher.spans(episode[column])
            if spans:
                fixed[column], taken = redact(episode[column], spans)
                reach.taken.update(taken)
        if fixed:
            reach.episodes[episode["id"]] = fixed


def _redacted_row(
    row: Mapping[str, Any], matcher: Matcher, reach: Reach
) -> dict[str, str | None] | None:
    """A change-log row's columns with the erased values' spans replaced (None: none)."""
    out: dict[str, str | None] = {}
    for column in ("before", "after"):
        if not row[column]:
            continue
        image = json.loads(row[column])
        touched = False
        for name in ("value", "source", "key"):
            spans = matcher.spans(image.get(name))
            if spans:
                image[name], taken = redact(image[name], spans)
                reach.taken.update(taken)
                touched = True
        if touched:
            out[column] = json.dumps(image, ensure_ascii=False, separators=(",", ":"))
    spans = matcher.spans(row.get("source"))
    if spans:
        out["source"], taken = redact(row["source"], spans)
        reach.taken.update(taken)
    return out or None


def erased_values_of(
    hot_rows: Sequence[dict[str, Any]], orphans: Sequence[dict[str, Any]]
) -> set[tuple[str, str, str, str]]:
    """(user, namespace, key, value) of every fact or preference value the erasure removes,
    from the rows and their change-log images: what no text of the user's may carry after."""
    images = [dict(row) for row in hot_rows]
    for row in orphans:
        images += [json.loads(row[c]) for c in ("before", "after") if row[c]]
    return {
        (str(i["user_id"]), str(i["namespace"]), str(i["key"]), str(i["value"]))
        for i in images
        if i.get("kind") in ("fact", "preference") and i.get("key") is not None and i.get("value")
    }


def reach_of(
    storage: Any,
    selection: Any,
    user_id: str | None,
    namespace: str | None,
    ids: Sequence[str],
    values: set[tuple[str, str, str, str]],
    *,
    write: bool,
) -> tuple[Reach | None, list[erased_values.ErasedValue]]:
    """What the erasure reaches beyond ``ids`` (:func:`plan`), and the hashes of its values
    (``write``: made with the database's secret, created if need be; a preview's are made
    with a throwaway one). Nothing for a whole user or namespace: it takes everything.

    A value of the user's profile (the default namespace) is followed into every namespace
    of the user (a project's session can mention where they live); a project's value, into
    that project only (its tone is not another project's)."""
    if user_id is None or selection.whole_user or selection.whole_namespace:
        return None, []
    scope = namespace or None
    conn = storage.hot.conn
    secret = erased_values.secret_of(conn, create=write and bool(values))
    if secret is None:
        secret = secrets.token_bytes(32)  # a preview before any forget: hashes not kept
    only_in = erased_values.namespace_digest(user_id, scope) if scope is not None else None
    hashed = []
    for user, stored_in, key, value in sorted(values):
        stored_under = erased_values.key_digest(user, stored_in, key)
        found = erased_values.hashed(secret, value, stored_under, only_in)
        if found is not None:
            hashed.append(found)
    plain = [value for *_, value in values]
    matcher = erased_values.Matcher.of(secret, hashed, plain=plain) if hashed else None
    by_id = selection.memory_id is not None
    reach = plan(storage, user_id, ids, matcher, by_id=by_id, namespace=scope)
    return reach, hashed
