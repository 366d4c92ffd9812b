"""The user-filter rule of docs/guides/scaling.md, judged on recorded statements (issue 23 item 7).

A memory larger than one primary is distributed by ``user_id``: every statement on a
distributed table must then name the user(s) it is about, or it runs on every shard. This
module parses each statement (sqlglot, PostgreSQL dialect) and finds, in every query scope
(a SELECT, an UPDATE, a DELETE, an INSERT's own rows) that reads or writes a distributed
table, a **user filter** on that table:

- ``user_id = x``, ``user_id IN (...)``, ``user_id = ANY(...)`` or a row value
  ``(user_id, ...) IN (...)`` that holds for the whole scope (in a top-level ``AND`` of its
  ``WHERE`` or of a join's ``ON``, never under an ``OR`` or a ``NOT``), or
- an equality ``t.user_id = other.user_id`` with a table of the same scope that is filtered
  (a colocated join), or with a correlated outer table that is;
- an INSERT ... VALUES that carries the ``user_id`` column (it is routed by that value).

A statement that reads or writes a distributed table without one is a **violation**, unless
it matches an entry of :data:`ALLOWED` (the jobs' documented scans, each explained in
docs/guides/scaling.md under its name). Statements on other tables (``job_runs``,
``schema_migrations``, the catalogs), DDL, ``SET``, and transaction control are not judged.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from helpers.user_filter_allowed import ALLOWED

# sqlglot warns (logging) when it falls back to a bare command for syntax it does not model.
logging.getLogger("sqlglot").setLevel(logging.ERROR)

DISTRIBUTED = frozenset(
    {"memories", "cold_memories", "vectors", "uses", "messages", "episodes", "changes"}
)
"""The tables distributed by user_id in docs/guides/scaling.md ("Tables")."""

_DDL = re.compile(r"\s*(CREATE|ALTER|DROP|VACUUM|ANALYZE|COMMENT|GRANT|REVOKE)\b", re.I)
"""Schema statements: not judged, and not parsed (the DDL steps are long)."""
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%s|\$\d+")
_PREPARED = re.compile(r"\s*PREPARE\s+\w+\s+AS\s+", re.IGNORECASE)
_NOT_JUDGED = (
    exp.Create,
    exp.Drop,
    exp.Alter,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
    exp.Set,
    exp.Command,
    exp.Analyze,
)


def shape(text: str) -> str:
    """The statement's shape: one line, comments dropped, string literals as ``?``, numbers
    as ``0``, a run of placeholders (or of literals) as one, schema qualifiers dropped."""
    text = collapse(text)
    text = re.sub(r"'(?:[^']|'')*'", "?", text)
    text = re.sub(r'"[^"]+"\."(\w+)"', r"\1", text)
    text = re.sub(r"%\(\w+\)s", "%s", text)
    text = re.sub(r"\b\d+\b", "0", text)
    text = re.sub(r"%s(?:, %s)+", "%s", text)
    return re.sub(r"\?(?:, \?)+", "?", text)


def _compiled(shapes: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(".*".join(map(re.escape, _bound(s).split("..."))) for s in shapes))


def _bound(line: str) -> str:
    """A shape with its parameters as literals: a statement sent with others in one string
    (storage/postgres/round_trips.py, ``Pending``) has its values quoted in."""
    line = re.sub(r"-?\b0(?:\.0)?\b", "?", line.replace("%s", "?"))  # a number quoted in
    return re.sub(r"\?(?:, \?)+", "?", line)


_STATEMENT_PART = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|;")


def statements_of(text: str) -> list[str]:
    """The statements of a text that holds several, split at the semicolons outside quotes."""
    parts, start = [], 0
    for match in _STATEMENT_PART.finditer(text):
        if match.group(0) == ";":
            parts.append(text[start : match.start()])
            start = match.end()
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


_ALLOWED = {name: _compiled(shapes) for name, shapes in ALLOWED.items()}


def allowed_as(text: str) -> str | None:
    """The name of the allow-list entry the statement matches (None: none)."""
    line = _bound(shape(text))
    return next((name for name, rule in _ALLOWED.items() if rule.fullmatch(line)), None)


@dataclass(frozen=True)
class Violation:
    statement: str
    origin: str
    tables: tuple[str, ...]

    def __str__(self) -> str:
        tables = ", ".join(self.tables)
        return f"{tables} without a user filter ({self.origin}):\n    {self.statement}"


def collapse(text: str) -> str:
    """The statement on one line (comments dropped), for messages and the allow-list."""
    text = re.sub(r"--[^\n]*", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def _name(table: exp.Table) -> str:
    return table.name.lower()


def _conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    """The top-level AND terms of a condition (an OR or NOT term stays whole)."""
    if node is None:
        return []
    node = node.unnest()
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _user_column(node: exp.Expression) -> exp.Column | None:
    node = node.unnest()
    if isinstance(node, exp.Column) and node.name.lower() == "user_id":
        return node
    return None


def _owner(column: exp.Column, aliases: dict[str, str], only: str | None) -> str | None:
    """The alias (or table name) a user_id column belongs to in this scope."""
    qualifier = column.table.lower()
    if qualifier:
        return qualifier if qualifier in aliases else None
    return only


def _filters(
    terms: list[exp.Expression], aliases: dict[str, str], outer: set[str]
) -> tuple[set[str], list[tuple[str, str]]]:
    """(aliases filtered by a user predicate, pairs joined on user_id) among ``terms``."""
    only = next(iter(aliases)) if len(aliases) == 1 else None
    filtered: set[str] = set()
    pairs: list[tuple[str, str]] = []
    for term in terms:
        if isinstance(term, exp.EQ):
            left, right = _user_column(term.left), _user_column(term.right)
            if left is not None and right is not None:
                a, b = _owner(left, aliases, None), _owner(right, aliases, None)
                a = a or (left.table.lower() if left.table.lower() in outer else None)
                b = b or (right.table.lower() if right.table.lower() in outer else None)
                if a and b:
                    pairs.append((a, b))
                continue
            column = left or right
            if column is not None and (owner := _owner(column, aliases, only)):
                filtered.add(owner)
        elif isinstance(term, exp.In):
            target = term.this.unnest()
            columns = target.expressions if isinstance(target, exp.Tuple) else [target]
            for column in columns:
                found = _user_column(column)
                if found is not None and (owner := _owner(found, aliases, only)):
                    filtered.add(owner)
    return filtered, pairs


def _closure(filtered: set[str], pairs: list[tuple[str, str]]) -> set[str]:
    changed = True
    while changed:
        changed = False
        for a, b in pairs:
            if (a in filtered) != (b in filtered):
                filtered |= {a, b}
                changed = True
    return filtered


def _direct_tables(scope: exp.Expression) -> list[tuple[str, str]]:
    """(alias, table) of the tables this scope itself reads or writes (not its subqueries)."""
    found = []
    for table in scope.find_all(exp.Table):
        if _scope_of(table) is scope:
            found.append(((table.alias or table.name).lower(), _name(table)))
    return found


_SCOPES = (exp.Select, exp.Update, exp.Delete, exp.Insert)


def _scope_of(node: exp.Expression) -> exp.Expression | None:
    parent = node.parent
    while parent is not None and not isinstance(parent, _SCOPES):
        parent = parent.parent
    return parent


def _scope_terms(scope: exp.Expression) -> list[exp.Expression]:
    terms = _conjuncts(scope.args.get("where") and scope.args["where"].this)
    for join in scope.args.get("joins") or []:
        terms += _conjuncts(join.args.get("on"))
    return terms


def unfiltered_tables(statement: exp.Expression, outer: set[str] | None = None) -> list[str]:
    """The distributed tables that some scope of ``statement`` reads or writes unfiltered."""
    missing: list[str] = []
    for scope in statement.find_all(*_SCOPES):
        tables = [(a, t) for a, t in _direct_tables(scope) if t in DISTRIBUTED]
        if not tables:
            continue
        if isinstance(scope, exp.Insert):
            columns = scope.this.expressions if isinstance(scope.this, exp.Schema) else []
            names = {c.name.lower() for c in columns}
            if isinstance(scope.expression, exp.Values) and "user_id" in names:
                continue
            if isinstance(scope.expression, exp.Select):
                continue  # judged as its own scope: the rows it selects
            missing += [t for _, t in tables]
            continue
        aliases = {a: t for a, t in _direct_tables(scope)}
        outers = _outer_filtered(scope) - set(aliases)  # an inner alias shadows an outer
        filtered, pairs = _filters(_scope_terms(scope), aliases, outers)
        filtered = _closure(filtered | outers, pairs)
        missing += [t for a, t in tables if a not in filtered]
    return missing


def _outer_filtered(scope: exp.Expression) -> set[str]:
    """Aliases of enclosing scopes that are filtered (a correlated subquery joins them)."""
    names: set[str] = set()
    parent = scope.parent
    while parent is not None:
        if isinstance(parent, _SCOPES) and not isinstance(parent, exp.Insert):
            aliases = {a: t for a, t in _direct_tables(parent)}
            filtered, pairs = _filters(_scope_terms(parent), aliases, set())
            names |= _closure(filtered, pairs)
        parent = parent.parent
    return names


_PGVECTOR_DISTANCES = re.compile(r"<#>|<=>|<->|<\+>")
"""pgvector's distance operators, which sqlglot does not know: read as a minus (a user
filter never depends on them)."""


def parse(text: str) -> list[exp.Expression]:
    """The statements of ``text`` (placeholders read as parameters)."""
    bound = _PLACEHOLDER.sub(lambda m: f":{m[1] or 'p'}", _PGVECTOR_DISTANCES.sub("-", text))
    return [s for s in sqlglot.parse(bound, read="postgres") if s is not None]


def judge(text: str, origin: str = "", *, allow: bool = True) -> Violation | None:
    """The statement's violation of the rule, or None (filtered, not judged, or with
    ``allow`` matching an entry of the allow-list)."""
    missing: list[str] = []
    try:
        statements = parse(text)
    except sqlglot.errors.SqlglotError as exc:  # judged unfiltered: a person must look
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Violation(collapse(text), f"{origin}; sqlglot could not parse it: {first}", ("?",))
    for statement in statements:
        if isinstance(statement, _NOT_JUDGED):
            continue
        if isinstance(statement, exp.TruncateTable):
            missing += [_name(t) for t in statement.expressions if _name(t) in DISTRIBUTED]
            continue
        missing += unfiltered_tables(statement)
    if not missing:
        return None
    if allow and allowed_as(text) is not None:
        return None
    return Violation(collapse(text), origin, tuple(dict.fromkeys(missing)))


def violations(seen: dict[str, str]) -> list[Violation]:
    """Every violation among recorded statements (text -> where it was first sent). One
    statement of each shape is parsed: the shape keeps everything but literals' values."""
    shapes: dict[str, tuple[str, str]] = {}
    for sent, origin in seen.items():
        for part in statements_of(sent) if ";" in sent else [sent]:
            # A statement the session keeps prepared is judged as its PREPARE gives it
            # (storage/postgres/named_statements.py); its EXECUTE names no table.
            text = _PREPARED.sub("", part, count=1)
            if _DDL.match(text) is None and any(table in text for table in DISTRIBUTED):
                shapes.setdefault(shape(text), (text, origin))
    found = []
    for text, origin in shapes.values():
        problem = judge(text, origin)
        if problem is not None:
            found.append(problem)
    return found
