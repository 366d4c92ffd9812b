"""The bench on PostgreSQL, beside SQLite's in the same run (``memkeeper bench --postgres URL``).

The same generated memory (the same seed gives the same rows, :func:`memkeeper.bench.
generate.tables`) is loaded into memkeeper's schema of the database ``URL`` names, and the
same measurements as on SQLite run there: a full pass alone and a second one right after,
the four agents (separate processes, separate connections) during a pass on a freshly
loaded copy and without one, the API's call rates and search for a user with 500 entries.

The database must be a scratch one: the bench refuses one that already holds a memkeeper
schema (it would change a real memory), and drops the schema it made when it ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from memkeeper.bench import measure
from memkeeper.bench.generate import NOW, Generated, tables
from memkeeper.config import Config
from memkeeper.errors import InvalidInput


def _fresh_storage(url: str):
    from memkeeper.storage.postgres.storage import PostgresStorage

    return PostgresStorage(url)


def refuse_a_real_memory(url: str) -> None:
    """InvalidInput unless the database has no memkeeper schema yet."""
    from memkeeper.storage.postgres.scratch import has_memkeeper_schema

    if has_memkeeper_schema(url):
        from memkeeper.storage.postgres.url import mask_url

        raise InvalidInput(
            f"--postgres {mask_url(url)} already holds a memkeeper schema; the bench loads and "
            "changes a million rows: give it a scratch database"
        )


def load(url: str, config: Config, *, memories: int, users: int, seed: int) -> Generated:
    """(Re)create memkeeper's schema in ``url`` and load the bench's rows into it."""
    from memkeeper.storage.postgres.bulk_load import bulk_load
    from memkeeper.storage.postgres.scratch import drop_memkeeper_schema

    began = time.perf_counter()
    drop_memkeeper_schema(url)
    storage = _fresh_storage(url)
    counts: dict[str, int] = {}
    try:
        for table, fields, rows in tables(config, memories=memories, users=users, seed=seed):
            counts[table] = bulk_load(storage, table, fields, rows)
    finally:
        storage.close()
    return Generated.of_load(counts, users, began)


def run_postgres(
    url: str,
    *,
    memories: int,
    users: int,
    seed: int,
    calls: int,
    children_factory: Callable[[str], Any],
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Every PostgreSQL measurement; the figures as one JSON-ready dict."""
    from memkeeper.storage.postgres.scratch import drop_memkeeper_schema, server_version

    config = Config()
    refuse_a_real_memory(url)
    try:
        say(f"postgres: loading {memories:,} memories over {users:,} users")
        generated = load(url, config, memories=memories, users=users, seed=seed)
        children = children_factory(url)
        try:
            say("postgres: full pass, then a second pass")
            first = children.ask(("pass", url))
            second = children.ask(("pass", url))
            say("postgres: reloading, then the agents during a pass")
            load(url, config, memories=memories, users=users, seed=seed)
            with_agents, during, idle = children.agents_around_a_pass(
                url, say=lambda: say("postgres: the agents with no pass")
            )
        finally:
            children.close()
        say("postgres: call rates and search")
        rates = measure.api_rates(url, config, NOW, calls)  # type: ignore[arg-type]
        search = measure.search_latency(url, config, NOW, min(calls, 300))  # type: ignore[arg-type]
        version = server_version(url)
    finally:
        drop_memkeeper_schema(url)
    return {
        "server": version,
        "database": generated.to_dict(),
        "pass": first,
        "second_pass": second,
        "agents_during_pass": {**during, "pass": with_agents},
        "agents_without_pass": idle,
        "rates": rates,
        "search": search,
    }
