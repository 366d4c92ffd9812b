"""Erased values: finding them in any text without keeping them (migration ``0009``).

A forget of a fact or preference erases its values, and with them every text of the user's
that carries one (:mod:`memkeeper.storage.derived`). So that nothing writes such a value back
afterwards (a summary of old messages, an extraction under another key, an import), the
erasure leaves behind, for each erased value, a *keyed hash* of its normalized words: no
plaintext, in any table.

**Words.** A text is cut into words: runs of letters and digits, and each Han or kana
character on its own (Chinese and Japanese are written without spaces, so "北京" is found in
"我住在北京"). Each word is normalized with NFKC and case-folded, so "Beijing", "BEIJING" and
its full-width form are the same word. A value is its sequence of words; a text
*carries* the value where the same sequence appears in it, word for word. "Beijinger" does not
carry "Beijing", and "Beijing, China" is not carried by a text that only says "Beijing".

**Hashes.** A value's hash is HMAC-SHA256 of its words (joined by ``\\x1f``) under a random key
made once per database (the ``erasure_secret`` row). Rows are per user (the sha256 of the
user id, as tombstones hold it) and name the key the value was stored under (the digest of a
``key`` tombstone), so that the user stating the value again *under the same key* lifts the
block, and nothing else does. A value of the user's profile (the default namespace) is
blocked in every namespace; a project's value only in that project (``namespace_digest``).
Whoever holds the database holds the secret too, and can confirm a guessed value by hashing
it; the hash keeps the value out of every dump, export,
log and index, and out of reach of anyone who cannot guess it.

**Too common to mean anything.** A value of fewer than five letters or digits (``"red"``,
``"Paris"`` is looked for, ``"2024"`` is not), or one made only of words like "yes", "true" or
"none", identifies nothing: it is erased with its entry but not looked for in other texts (a
summary saying "red" is no residue of it, and an agent may still store "red" under another
key). A Han or kana character counts three (``"北京"`` is looked for, ``"猫"`` is not).
"""

from __future__ import annotations

import hmac
import re
import secrets
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memkeeper.clock import to_db
from memkeeper.errors import ErasedValueRefused
from memkeeper.storage.tombstones import digest_of, joined_digest

REDACTED = "[erased]"
"""What an erased span of a kept text is replaced with."""

_IDEOGRAPHS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
_WORD = re.compile(rf"[{_IDEOGRAPHS}]|[^\W_{_IDEOGRAPHS}]+")
_SEPARATOR = "\x1f"
_MEANINGLESS = frozenset(
    {"yes", "no", "y", "n", "true", "false", "on", "off", "none", "null", "nil", "na", "ok"}
    | {"okay", "unknown", "not", "set"}
)
MIN_WEIGHT = 5


@dataclass(frozen=True)
class Word:
    """One word of a text: where it is in the original, and its normalized form."""

    start: int
    end: int
    norm: str


def words(text: str) -> list[Word]:
    """The words of ``text`` with their places (see the module doc)."""
    found = []
    for match in _WORD.finditer(text):
        norm = unicodedata.normalize("NFKC", match.group()).casefold()
        if norm:
            found.append(Word(match.start(), match.end(), norm))
    return found


_IDEOGRAPH = re.compile(f"[{_IDEOGRAPHS}]")


def _weight(norms: Sequence[str]) -> int:
    """Letters and digits count one, a Han or kana character three."""
    return sum(3 if _IDEOGRAPH.fullmatch(w) else len(w) for w in norms)


def identifies(value: str | None) -> bool:
    """True when ``value`` is specific enough to be looked for in other texts."""
    if not value:
        return False
    norms = [w.norm for w in words(value)]
    if not norms or all(w in _MEANINGLESS for w in norms):
        return False
    return _weight(norms) >= MIN_WEIGHT


def user_digest(user_id: str) -> str:
    """How the rows name a user: the digest a ``user`` tombstone holds."""
    return digest_of("user", user_id)


def key_digest(user_id: str, namespace: str, key: str) -> str:
    """How the rows name the key a value was stored under: a ``key`` tombstone's digest."""
    return digest_of("key", user_id, namespace, key)


def namespace_digest(user_id: str, namespace: str) -> str:
    """How the rows name the one namespace (a project) a value is blocked in."""
    return joined_digest("namespace", user_id, namespace)


def _hash(secret: bytes, norms: Sequence[str]) -> str:
    text = _SEPARATOR.join(norms).encode("utf-8", "surrogatepass")
    return hmac.digest(secret, text, "sha256").hex()


@dataclass(frozen=True)
class ErasedValue:
    """One erased value, as stored: its length in words, its keyed hash, the key it was
    stored under and the one namespace it is blocked in (None: every namespace)."""

    length: int
    digest: str
    key_digest: str
    namespace_digest: str | None = None


@dataclass
class Matcher:
    """Finds erased values in texts, from their hashes alone.

    ``first_words``: when the values themselves are at hand (a forget, in its own
    transaction), their first words, normalized: a text none of them is in, normalized whole
    (about 700 times cheaper than cutting it into words and hashing each run), carries none
    of the values, and is passed over. A user's 10,000 messages take milliseconds instead
    of seconds under the write lock.
    """

    secret: bytes
    by_length: dict[int, set[str]] = field(default_factory=dict)
    first_words: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls, secret: bytes, values: Iterable[ErasedValue], *, plain: Iterable[str] = ()
    ) -> Matcher:
        """A matcher of ``values``; ``plain``: the same values' texts, when known."""
        matcher = cls(secret)
        for value in values:
            matcher.by_length.setdefault(value.length, set()).add(value.digest)
        firsts = {found[0].norm for text in plain if (found := words(text))}
        matcher.first_words = frozenset(firsts)
        return matcher

    def __bool__(self) -> bool:
        return bool(self.by_length)

    def _may_carry(self, text: str) -> bool:
        """False only when ``text`` surely carries none of the values (see the class doc).
        A combining mark may compose with the end of a word once the text is normalized
        whole, which cutting into words would not do: such texts are always looked at."""
        if not self.first_words:
            return True
        if not text.isascii() and any(unicodedata.category(c)[0] == "M" for c in text):
            return True
        folded = unicodedata.normalize("NFKC", text).casefold()
        return any(first in folded for first in self.first_words)

    def spans(self, text: str | None) -> list[tuple[int, int]]:
        """The places in ``text`` that carry an erased value, merged, in order."""
        if not text or not self.by_length or not self._may_carry(text):
            return []
        found = words(text)
        norms = [w.norm for w in found]
        hits: list[tuple[int, int]] = []
        for length, digests in self.by_length.items():
            for i in range(len(found) - length + 1):
                if _hash(self.secret, norms[i : i + length]) in digests:
                    hits.append((found[i].start, found[i + length - 1].end))
        return _merged(hits)

    def carries(self, text: str | None) -> bool:
        return bool(self.spans(text))


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def redact(text: str, spans: Sequence[tuple[int, int]]) -> tuple[str, list[str]]:
    """``text`` with each span replaced by :data:`REDACTED`, and the spans' own texts."""
    out, taken, last = [], [], 0
    for start, end in spans:
        out.append(text[last:start])
        out.append(REDACTED)
        taken.append(text[start:end])
        last = end
    out.append(text[last:])
    return "".join(out), taken


# -- the rows -------------------------------------------------------------------------------


def secret_of(conn: Any, *, create: bool) -> bytes | None:
    """The database's HMAC key (made on first use when ``create``; None if none yet)."""
    row = conn.execute("SELECT secret FROM erasure_secret WHERE id = 1").fetchone()
    if row is not None:
        return bytes.fromhex(row[0])
    if not create:
        return None
    made = secrets.token_hex(32)
    conn.execute("INSERT INTO erasure_secret (id, secret) VALUES (1, ?)", [made])
    return bytes.fromhex(made)


def hashed(
    secret: bytes, value: str, key_digest_: str, namespace_digest_: str | None = None
) -> ErasedValue | None:
    """The row an erased value leaves (None for a value too common to look for)."""
    if not identifies(value):
        return None
    norms = [w.norm for w in words(value)]
    return ErasedValue(len(norms), _hash(secret, norms), key_digest_, namespace_digest_)


_COLUMNS = "user_digest, key_digest, namespace_digest, length, digest, erased_at"


def record(conn: Any, user_id: str, values: Iterable[ErasedValue], now: datetime) -> int:
    """Store erased values of a user, inside the erasure's transaction; returns how many."""
    rows = [
        (user_digest(user_id), v.key_digest, v.namespace_digest, v.length, v.digest, to_db(now))
        for v in set(values)
    ]
    if rows:
        conn.executemany(f"INSERT INTO erased_values ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", rows)
    return len(rows)


def of_user(conn: Any, user_id: str, namespace: str | None = None) -> list[ErasedValue]:
    """The erased values of a user still blocked in ``namespace`` (None: in any)."""
    sql = "SELECT length, digest, key_digest, namespace_digest FROM erased_values"
    sql += " WHERE user_digest = ?"
    params: list[Any] = [user_digest(user_id)]
    if namespace is not None:
        sql += " AND (namespace_digest IS NULL OR namespace_digest = ?)"
        params.append(namespace_digest(user_id, namespace))
    rows = conn.execute(sql, params).fetchall()
    return [ErasedValue(int(r[0]), r[1], r[2], r[3]) for r in rows]


def matcher_for(conn: Any, user_id: str, namespace: str) -> Matcher | None:
    """A matcher of the values erased for a user's texts in ``namespace`` (None: none)."""
    values = of_user(conn, user_id, namespace)
    if not values:
        return None
    secret = secret_of(conn, create=False)
    return Matcher.of(secret, values) if secret is not None else None


def lift(conn: Any, user_id: str, namespace: str, key: str, value: str) -> int:
    """The user states ``value`` under a key a value of theirs was erased from: if ``value``
    carries that erased value, it is an explicit new fact and no longer blocked.

    Returns how many rows were lifted (0: nothing erased under that key is in ``value``).
    """
    stored_under = key_digest(user_id, namespace, key)
    rows = [v for v in of_user(conn, user_id) if v.key_digest == stored_under]
    secret = secret_of(conn, create=False) if rows else None
    if secret is None:
        return 0
    said = [v for v in rows if Matcher.of(secret, [v]).carries(value)]
    for found in said:
        conn.execute(
            "DELETE FROM erased_values WHERE user_digest = ? AND key_digest = ? AND digest = ?",
            [user_digest(user_id), found.key_digest, found.digest],
        )
    return len(said)


def refuse_carried(
    conn: Any, user_id: str, namespace: str, texts: Mapping[str, str | None]
) -> None:
    """Raise :class:`~memkeeper.errors.ErasedValueRefused` when one of ``texts`` (by field
    name), to be stored in ``namespace``, carries a value the user had erased; call it
    inside the write's transaction."""
    matcher = matcher_for(conn, user_id, namespace)
    if matcher is None:
        return
    for name, text in texts.items():
        if matcher.carries(text):
            raise ErasedValueRefused(
                f"{name}: it carries a value user {user_id!r} asked to forget; memkeeper does "
                "not store it again, except as the user's new statement of the same fact: "
                "remember it under the key it was erased from"
            )


def carried_over(conn: Any) -> tuple[bytes | None, list[tuple[Any, ...]]]:
    """The secret and every row, to carry them into a copy of the database (a backup being
    pruned), so that a restored copy refuses the same values."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM erased_values").fetchall()
    return secret_of(conn, create=False), [tuple(row) for row in rows]


def copy_in(conn: Any, secret: bytes | None, rows: Iterable[tuple[Any, ...]]) -> int:
    """Insert the rows another copy holds and this one lacks, inside the caller's
    transaction; returns how many. Rows hashed under another secret than this copy's own
    (a copy that made its own after it was taken) cannot be matched here and are left out."""
    if secret is None:
        return 0
    own = secret_of(conn, create=False)
    if own is None:
        conn.execute("INSERT INTO erasure_secret (id, secret) VALUES (1, ?)", [secret.hex()])
    elif own != secret:
        return 0
    have = {tuple(row[:5]) for row in conn.execute(f"SELECT {_COLUMNS} FROM erased_values")}
    missing = [row for row in rows if tuple(row[:5]) not in have]
    if missing:
        conn.executemany(
            f"INSERT INTO erased_values ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", missing
        )
    return len(missing)
