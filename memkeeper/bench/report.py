"""The bench's figures against issue 10's targets, and as a table for people."""

from __future__ import annotations

from typing import Any

from memkeeper.bench.report_postgres import postgres_rows, postgres_targets


def targets(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of the table in the README, its figure in this run, and whether it holds."""
    during = figures["agents_during_pass"]
    errors = during["errors"]
    p99, worst = during["p99_ms"], during["max_ms"]
    growth = figures["growth"]["bytes_per_recall"]
    meaning = figures["search"]["by_meaning"]
    return [
        {
            "what": "memkeeper / floor",
            "figure": figures["floor"]["ratio"],
            "target": "<= 1.5",
            "met": figures["floor"]["ratio"] <= 1.5 and figures["floor"]["same_state"],
        },
        {
            "what": "second pass, % of the first",
            "figure": figures["second_pass"]["percent_of_first"],
            "target": "<= 3",
            "met": figures["second_pass"]["percent_of_first"] <= 3,
        },
        {
            "what": "agents during a pass: p99 / max ms, errors",
            "figure": [p99, worst, errors],
            "target": "p99 <= 50, max <= 250, 0 errors",
            "met": p99 is not None and p99 <= 50 and worst <= 250 and errors == 0,
        },
        {
            "what": "growth per recall, bytes",
            "figure": growth,
            "target": "<= 100",
            "met": growth <= 100,
        },
        {
            "what": "search, user with 500 entries: p50 / p99 ms (no query embedding)",
            "figure": [meaning["p50_ms"], meaning["p99_ms"]],
            "target": "p50 <= 5, p99 <= 20",
            "met": meaning["p50_ms"] is not None
            and meaning["p50_ms"] <= 5
            and meaning["p99_ms"] <= 20,
        },
        {
            "what": "peak RSS of the pass, MiB",
            "figure": figures["pass"]["peak_rss_mb"],
            "target": "<= 150",
            "met": figures["pass"]["peak_rss_mb"] <= 150,
        },
        *postgres_targets(figures),
    ]


def _n(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _labels(by_label: dict[str, int]) -> str:
    return ", ".join(f"{label} {count:,}" for label, count in by_label.items()) or "none"


def _search(figures: dict[str, Any]) -> str:
    if not figures["searches"]:
        return "n/a (no search)"
    index = figures["keyword_index"]
    return (
        f"{figures['p50_ms']} / {figures['p99_ms']} / {figures['max_ms']} ms over "
        f"{figures['searches']} searches (keyword signal, no key); keyword index "
        f"{index['bytes'] / 2**20:,.1f} MiB = {index['percent_of_file']} % of the hot file"
    )


def _by_meaning(figures: dict[str, Any]) -> str:
    return (
        f"{figures['p50_ms']} / {figures['p99_ms']} / {figures['max_ms']} ms over "
        f"{figures['searches']} searches ({figures['by_meaning']} by meaning), query "
        f"embedding apart: p50 {figures['embed_p50_ms']} ms, max {figures['embed_max_ms']} ms"
    )


def _index(figures: dict[str, Any]) -> str:
    return (
        f"{figures['entries_indexed']:,} entries in {figures['seconds']} s = "
        f"{_n(figures['entries_per_s'])} entries/s ({figures['percent_of_ideal']} % of the "
        f"{_n(figures['ideal_entries_per_s'])}/s that batches of {figures['batch']} x "
        f"{figures['concurrency']} in flight allow), {figures['calls']} calls, at most "
        f"{figures['max_in_flight']} in flight, {figures['entries_failed']} failed"
    )


def latency_text(figures: dict[str, Any]) -> str:
    """Agents' latency figures (:mod:`memkeeper.bench.measure`) as one line for people."""
    if not figures["calls"]:
        return "no calls"
    text = f"{figures['p50_ms']} / {figures['p99_ms']} / {figures['max_ms']} ms, "
    text += f"{figures['errors']} errors ({figures['calls']:,} calls in {figures['seconds']} s)"
    if figures["error_samples"]:
        text += f"; e.g. {figures['error_samples'][0]}"
    return text


def table(figures: dict[str, Any]) -> str:
    """The figures as a readable table, each target's verdict beside its figure."""
    params, db, machine = figures["parameters"], figures["database"], figures["machine"]
    first, second, floor = figures["pass"], figures["second_pass"], figures["floor"]
    during, growth, rates = figures["agents_during_pass"], figures["growth"], figures["rates"]
    verdicts = {t["what"]: ("ok" if t["met"] else "MISSED") for t in figures["targets"]}
    search = rates["search"]
    rows = [
        (
            "full pass (settle, expire, demote, prune)",
            f"{_n(first['seconds'])} s, {first['changes']:,} changes "
            f"({first['due_percent']} % of the memories)",
            "",
        ),
        ("  changes", _labels(first["by_label"]), ""),
        (
            "second pass right after (nothing due)",
            f"{_n(second['seconds'])} s = {second['percent_of_first']} % of the first, "
            f"{second['changes']:,} changes",
            f"<= 3 %  {verdicts['second pass, % of the first']}",
        ),
        (
            f"raw-SQL floor (chunks of {floor['chunk']:,})",
            f"{_n(floor['seconds'])} s (selecting {_n(floor['select_seconds'])} s), "
            f"{floor['changes']:,} changes; same end state: "
            f"{'yes' if floor['same_state'] else 'NO ' + str(floor['differences'])}",
            "",
        ),
        (
            "memkeeper / floor",
            f"{floor['ratio']} x",
            f"<= 1.5 x  {verdicts['memkeeper / floor']}",
        ),
        (
            f"{params['agents']} agents during a pass: p50 / p99 / max",
            latency_text(during) + f"; the pass took {_n(during['pass']['seconds'])} s",
            "p99 <= 50, max <= 250 ms, 0 errors  "
            + verdicts["agents during a pass: p99 / max ms, errors"],
        ),
        (
            f"{params['agents']} agents, no pass: p50 / p99 / max",
            latency_text(figures["agents_without_pass"]),
            "",
        ),
        (
            "peak RSS of the pass",
            f"{_n(first['peak_rss_mb'])} MiB",
            f"<= 150 MiB  {verdicts['peak RSS of the pass, MiB']}",
        ),
        (
            "database growth per recall",
            f"{_n(growth['bytes_per_recall'])} bytes in use "
            f"(file {_n(growth['file_bytes_per_recall'])} bytes, "
            f"{growth['change_rows_per_recall']} change-log rows) over {growth['recalls']:,} "
            "recalls",
            f"<= 100 bytes  {verdicts['growth per recall, bytes']}",
        ),
        (
            "search, a user with 500 entries, keyword-only",
            _search(figures["search"]),
            "",
        ),
        (
            "search by meaning, the same size: p50 / p99 / max",
            _by_meaning(figures["search"]["by_meaning"]),
            "p50 <= 5, p99 <= 20 ms  "
            + verdicts["search, user with 500 entries: p50 / p99 ms (no query embedding)"],
        ),
        (
            f"index job, one run, stand-in at {figures['index']['latency_ms']} ms a call",
            _index(figures["index"]),
            "",
        ),
        (
            "recall / remember / search, one process",
            f"{_n(rates['recall'])} / {_n(rates['remember'])} / "
            f"{'n/a' if search is None else _n(search)} calls/s",
            "",
        ),
        *postgres_rows(figures),
    ]
    width = max(len(label) for label, _, _ in rows)
    head = (
        f"memkeeper bench: {params['memories']:,} memories over {params['users']:,} users "
        f"(seed {params['seed']}), now = {params['now']}\n"
        f"{figures['date']}, memkeeper {figures['memkeeper']}, {machine['cpus']} CPUs, "
        f"Python {machine['python']}, SQLite {machine['sqlite']}; batch size "
        f"{params['batch_size']}\n"
        f"database: {db['hot_memories']:,} hot + {db['cold_memories']:,} cold memories, "
        f"{db['messages']:,} messages, {db['bytes'] / 2**20:,.1f} MiB, generated in "
        f"{_n(db['seconds'])} s\n"
    )
    lines = [head]
    for label, figure, target in rows:
        line = f"{label:<{width}}  {figure}"
        lines.append(line + (f"\n{'':<{width}}  target {target}" if target else ""))
    lines.append(f"\n(whole bench: {_n(figures['seconds'])} s)")
    return "\n".join(lines)
