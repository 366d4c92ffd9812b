"""The PostgreSQL figures of a bench run beside SQLite's: issue 22's targets and the rows of
the table (``memkeeper bench --postgres URL``)."""

from __future__ import annotations

from typing import Any


def postgres_targets(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 22's targets on PostgreSQL, measured against SQLite's figures of the same run."""
    pg = figures.get("postgres")
    if pg is None:
        return []
    ratio = pg["pass"]["seconds"] / figures["pass"]["seconds"]
    during = pg["agents_during_pass"]
    search = pg["search"]
    return [
        {
            "what": "postgres pass / sqlite pass",
            "figure": round(ratio, 2),
            "target": "<= 1",
            "met": ratio <= 1 and not pg["pass"]["errors"],
        },
        {
            "what": "postgres agents during a pass: p99 ms, errors",
            "figure": [during["p99_ms"], during["errors"]],
            "target": "p99 <= 20, 0 errors",
            "met": during["p99_ms"] is not None and during["p99_ms"] <= 20 and not during["errors"],
        },
        {
            "what": "postgres search, user with 500 entries: p50 / p99 ms",
            "figure": [search["p50_ms"], search["p99_ms"]],
            "target": "p50 <= 5, p99 <= 20",
            "met": search["p50_ms"] is not None
            and search["p50_ms"] <= 5
            and search["p99_ms"] <= 20,
        },
    ]


def _latency(figures: dict[str, Any]) -> str:
    if not figures["calls"]:
        return "no calls"
    return (
        f"{figures['p50_ms']} / {figures['p99_ms']} / {figures['max_ms']} ms, "
        f"{figures['errors']} errors ({figures['calls']:,} calls in {figures['seconds']} s)"
    )


def postgres_rows(figures: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The table's PostgreSQL rows (label, figure, target with its verdict)."""
    pg = figures.get("postgres")
    if pg is None:
        return []
    verdicts = {t["what"]: ("ok" if t["met"] else "MISSED") for t in figures["targets"]}
    first, second, rates = pg["pass"], pg["second_pass"], pg["rates"]
    search, db = pg["search"], pg["database"]
    return [
        (
            f"PostgreSQL {pg['server']}: loaded",
            f"{db['hot_memories']:,} hot + {db['cold_memories']:,} cold memories, "
            f"{db['messages']:,} messages in {db['seconds']:.1f} s",
            "",
        ),
        (
            "  full pass",
            f"{first['seconds']:.2f} s, {first['changes']:,} changes "
            f"(SQLite {figures['pass']['seconds']:.2f} s, {figures['pass']['changes']:,})",
            f"<= SQLite's  {verdicts['postgres pass / sqlite pass']}",
        ),
        ("  second pass right after", f"{second['seconds']:.2f} s", ""),
        (
            "  agents during a pass: p50 / p99 / max",
            _latency(pg["agents_during_pass"]),
            f"p99 <= 20 ms, 0 errors  {verdicts['postgres agents during a pass: p99 ms, errors']}",
        ),
        ("  agents, no pass", _latency(pg["agents_without_pass"]), ""),
        (
            "  search, 500 entries, keyword-only: p50 / p99 / max",
            f"{search['p50_ms']} / {search['p99_ms']} / {search['max_ms']} ms",
            "p50 <= 5, p99 <= 20 ms  "
            + verdicts["postgres search, user with 500 entries: p50 / p99 ms"],
        ),
        (
            "  recall / remember / search, one process",
            f"{rates['recall']} / {rates['remember']} / {rates['search']} calls/s",
            "",
        ),
    ]
