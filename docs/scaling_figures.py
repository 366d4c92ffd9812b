"""The figures of docs/guides/scaling.md that ``memkeeper bench`` does not print (from a checkout).

    python docs/scaling_figures.py sizes  postgresql:///scratch [--memories 100000 --users 1000]
    python docs/scaling_figures.py writes postgresql:///scratch [--seconds 10]

``sizes`` loads the bench's generated memory into the scratch database the bench's way
(``memkeeper.bench.postgres_bench.load``), runs ``VACUUM ANALYZE`` and prints each table's
rows, heap and index bytes, each index's bytes and the database's size, then drops the
schema. ``writes`` prints the remember/s and recall/s of 1, 2 and 4 processes together,
each with a store of its own writing for a user of its own. Like the bench, both refuse a
database that already holds a memkeeper schema.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time

import psycopg

from memkeeper import MemoryStore
from memkeeper.bench.postgres_bench import load, refuse_a_real_memory
from memkeeper.config import Config
from memkeeper.storage.postgres.scratch import drop_memkeeper_schema

_TABLES = """SELECT c.relname, c.reltuples::bigint, pg_table_size(c.oid), pg_indexes_size(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'memkeeper' AND c.relkind = 'r' ORDER BY pg_total_relation_size(c.oid) DESC"""
_INDEXES = """SELECT i.indexrelid::regclass::text, pg_relation_size(i.indexrelid)
FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'memkeeper' ORDER BY 2 DESC"""


def sizes(url: str, memories: int, users: int) -> None:
    began = time.perf_counter()
    generated = load(url, Config(), memories=memories, users=users, seed=1)
    print(f"loaded in {time.perf_counter() - began:.1f} s: {generated.to_dict()}")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
            for name, rows, heap, indexes in conn.execute(_TABLES):
                print(f"table {name}: {rows} rows, heap {heap:,} B, indexes {indexes:,} B")
            for name, size in conn.execute(_INDEXES):
                print(f"index {name}: {size:,} B")
            total = conn.execute("SELECT pg_database_size(current_database())").fetchone()
            print(f"database: {total[0]:,} B")
    finally:
        drop_memkeeper_schema(url)


def _writer(url: str, user: str, op: str, seconds: float, done: multiprocessing.Queue) -> None:
    with MemoryStore(url) as store:
        if op == "recall":
            for key in range(50):
                store.remember(user, f"k{key}", "v")
        calls, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            if op == "remember":
                store.remember(user, f"k{calls % 5000}", f"value {calls}")
            else:
                store.recall(user, f"k{calls % 50}")
            calls += 1
    done.put(calls)


def writes(url: str, seconds: float) -> None:
    MemoryStore(url).close()  # the schema, created once
    try:
        for op in ("remember", "recall"):
            for count in (1, 2, 4):
                done: multiprocessing.Queue = multiprocessing.Queue()
                users = [f"{op}-{count}-{i}" for i in range(count)]
                workers = [
                    multiprocessing.Process(target=_writer, args=(url, u, op, seconds, done))
                    for u in users
                ]
                for worker in workers:
                    worker.start()
                total = sum(done.get() for _ in workers)
                for worker in workers:
                    worker.join()
                print(f"{op}, {count} process(es): {total / seconds:,.0f} calls/s in total")
    finally:
        drop_memkeeper_schema(url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("figure", choices=("sizes", "writes"))
    parser.add_argument("url", help="a scratch PostgreSQL database (postgresql://...)")
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    refuse_a_real_memory(args.url)
    if args.figure == "sizes":
        sizes(args.url, args.memories, args.users)
    else:
        writes(args.url, args.seconds)


if __name__ == "__main__":
    main()
