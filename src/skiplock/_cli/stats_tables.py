"""``skiplock stats``'s tables (rich): red where an alert threshold is crossed, in place of the
narrow listing where they would not fit, redrawn in place under ``--watch``. Loaded only when
a person asks for tables: ``--json`` and every other command start without rich.

Every name and key reaches rich through ``printable``: rich drops BEL and CR from a ``Text``
but passes ESC, DEL and the C1 controls to the terminal (measured, rich 15), so a queue named
``"\\x1b]0;pwned\\x07"`` would retitle it. Rich's own styling escapes are unaffected."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from rich.console import Console, Group
from rich.live import Live
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from .._job import BlockedKey, KeyLoad, StorageHold
from .._observe.holds import DOCS, describe, duration, relations, remedy, size
from .._observe.stats import Stats, StatsGroup
from .output import printable
from .support import Down

Reading = list[tuple[str, Stats | Down]]
"""A reading of every database of the App: its Stats, or why it could not be read."""


@dataclass(frozen=True, slots=True)
class Alerts:
    """The thresholds a number turns red past: backlog age, any dead job, any reclaim."""

    backlog_age_s: float

    def crossed(self, group: StatsGroup) -> set[str]:
        """The fields of ``group`` past their threshold."""
        crossed = set()
        if group.backlog_age_s > self.backlog_age_s:
            crossed.add("backlog_age_s")
        if group.dead > 0:
            crossed.add("dead")
        if group.reclaims > 0:
            crossed.add("reclaims")
        return crossed


NOW_COLUMNS: list[tuple[str, str]] = [
    ("pending", "pending"),
    ("ready", "ready"),
    ("scheduled", "scheduled"),
    ("retrying", "retrying"),
    ("claimed", "claimed"),
    ("running", "running"),
    ("waiting", "waiting"),
    ("backlog_age_s", "backlog age"),
]
"""The depths' table: (cell, header) in order."""

WINDOW_COLUMNS: list[tuple[str, str]] = [
    ("claim_latency", "claim p50 p95 max"),
    ("attempts", "attempts 1 2 3 4+"),
    ("completed", "done"),
    ("failed", "failed"),
    ("dead", "dead"),
    ("reclaims", "reclaims"),
    ("run_duration", "run p50 p95"),
    ("throughput_per_s", "jobs/s"),
]
"""The window's table: a cell is a StatsGroup field, or several joined by spaces."""

_JOINED = {
    "claim_latency": ("claim_latency_p50_s", "claim_latency_p95_s", "claim_latency_max_s"),
    "attempts": ("attempts_1", "attempts_2", "attempts_3", "attempts_4_plus"),
    "run_duration": ("run_duration_p50_s", "run_duration_p95_s"),
}


def _cell(group: StatsGroup, name: str) -> str:
    if name in _JOINED:
        return " ".join(_cell(group, part) for part in _JOINED[name])
    value = getattr(group, name)
    if value is None:
        return "-"
    if name.endswith("_s") and not name.endswith("_per_s"):
        return _duration(float(value))
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def table(
    title: str, groups: list[StatsGroup], columns: list[tuple[str, str]], alerts: Alerts
) -> Table:
    """One row per group; a number past its alert threshold in bold red."""
    out = Table(title=title, title_justify="left", header_style="bold")
    out.add_column("name", overflow="fold")
    for _, header in columns:  # fold, never cut: a number must show whole on a narrow terminal
        out.add_column(header, justify="right", overflow="fold")
    for group in groups:
        crossed = alerts.crossed(group)
        row = [Text(printable(group.name or "(all)"), style="bold")]
        row += [
            Text(_cell(group, name), style="bold red" if name in crossed else "")
            for name, _ in columns
        ]
        out.add_row(*row)
    return out


_NARROW = {
    "claim_latency": "claim p50/p95/max",
    "attempts": "attempts 1/2/3/4+",
    "run_duration": "run p50/p95",
}
"""A joined cell's label in the narrow layout, its values joined by "/" to match."""


def listing(
    title: str, groups: list[StatsGroup], columns: list[tuple[str, str]], alerts: Alerts, width: int
) -> Group:
    """The narrow layout of ``table``: each group's name on a line of its own, then its numbers
    as ``label value`` pairs packed into indented lines no wider than ``width``."""
    lines: list[Text] = [Text(title, style="bold")]
    for group in groups:
        crossed = alerts.crossed(group)
        lines.append(Text(printable(group.name or "(all)"), style="bold", overflow="fold"))
        line = Text("  ")
        for name, header in columns:
            value = _cell(group, name)
            label = _NARROW.get(name, header)
            if name in _NARROW:
                value = value.replace(" ", "/")
            pair = Text(f"{label} ")
            pair.append(value, style="bold red" if name in crossed else "")
            if len(line) > 2 and len(line) + 2 + len(pair) > width:
                lines.append(line)
                line = Text("  ")
            if len(line) > 2:
                line.append("  ")
            line.append_text(pair)
        lines.append(line)
    return Group(*lines)


def render(stats: Stats, alerts: Alerts, width: int = 10_000) -> Group:
    """Per queue (the total first), then per task: the depths now, then the window; as tables
    where they fit in ``width`` columns, else as the narrow listing (a terminal of 80, a
    pipe), so no number is folded or a header cut in two."""
    when = stats.at.strftime("%Y-%m-%d %H:%M:%S %Z")
    window = f"last {_duration(stats.window_s)}"
    queues = [stats.total, *stats.queues]
    tasks = list(stats.tasks)
    sections = [
        ("queues now", queues, NOW_COLUMNS),
        (f"queues, {window}", queues, WINDOW_COLUMNS),
        ("tasks now", tasks, NOW_COLUMNS),
        (f"tasks, {window}", tasks, WINDOW_COLUMNS),
    ]
    tables = [table(title, groups, columns, alerts) for title, groups, columns in sections]
    keys = [keys_table(stats.keys)] if stats.keys else []
    blocked = [blocked_lines(stats.blocked_keys)] if stats.blocked_keys else []
    blocked += [storage_lines(stats.storage, stats.at)] if stats.storage else []
    if all(_natural_width(t) <= width for t in tables + keys):
        return Group(Text(f"skiplock at {when}", style="bold"), *tables, *keys, *blocked)
    return Group(
        Text(f"skiplock at {when}", style="bold"),
        *(listing(title, groups, columns, alerts, width) for title, groups, columns in sections),
        *([keys_listing(stats.keys)] if stats.keys else []),
        *blocked,
    )


STORAGE_TITLE = "storage upkeep held back"

_HELD = {
    "lock": "the live segments' rotation cannot lock",
    "horizon": "the live jobs' vacuum cannot remove dead versions behind the MVCC horizon",
    "wal": "checkpoints cannot copy the write-ahead log back",
}


def _hold_line(hold: StorageHold) -> str:
    """What one hold stops, and what it costs."""
    line = _HELD.get(hold.hold, hold.hold)
    if hold.relations:
        line += f" {relations(hold.relations)}"
    if hold.held_s is not None:
        line += f" (for {duration(hold.held_s)})"
    if hold.dead_versions is not None:
        line += f": {hold.dead_versions:,} dead row versions wait"
    if hold.wal_bytes is not None:
        line += f": the -wal file is {size(hold.wal_bytes)}"
        if hold.wal_pending_bytes is not None:
            line += f", {size(hold.wal_pending_bytes)} of it not checkpointed"
    return line


def storage_lines(holds: tuple[StorageHold, ...], at: datetime) -> Group:
    """What holds the storage's upkeep back, in bold red: each hold, what it costs, and who
    holds it with what to do (SQLite cannot name its reader: said so)."""
    lines = [Text(STORAGE_TITLE + f" (see {DOCS})", style="bold red", overflow="fold")]
    for hold in holds:
        lines.append(Text(_hold_line(hold), style="bold", overflow="fold"))
        for holder in hold.holders:
            lines.append(Text(f"  {describe(holder)}", overflow="fold"))
            started = _since(holder.query_start, at)
            if started:
                lines.append(Text(f"    query started {started} ago", overflow="fold"))
            lines.append(Text(f"    {remedy(holder)}", overflow="fold"))
        if hold.hold == "wal":
            lines.append(
                Text(
                    "  a reader's open transaction (SQLite cannot say which connection's): end it",
                    overflow="fold",
                )
            )
    return Group(*lines)


def _since(when: datetime | None, at: datetime) -> str:
    """How long before ``at`` (the reading's database now) ``when`` was ("": unknown)."""
    if when is None:
        return ""
    return duration(max(0.0, (at - when).total_seconds()))


def blocked_lines(blocked: tuple[BlockedKey, ...]) -> Group:
    """The ordered keys a dead job holds, in bold red: each waits for a person."""
    lines = [Text("ordered keys held by a dead job (retry or discard it)", style="bold red")]
    for held in blocked:
        lines.append(Text(printable(held.key), style="bold", overflow="fold"))
        lines.append(Text(f"  dead job {held.dead_job_id}  waiting {held.waiting}"))
    return Group(*lines)


KEYS_TITLE = "busiest concurrency keys now"


def _limit(load: KeyLoad) -> str:
    return "-" if load.key_limit is None else str(load.key_limit)


def keys_table(keys: tuple[KeyLoad, ...]) -> Table:
    """The busiest keys: running (bold where a key is at its limit), ready, pending, limit."""
    out = Table(title=KEYS_TITLE, title_justify="left", header_style="bold")
    out.add_column("key", overflow="fold")
    for header in ("running", "ready", "pending", "limit"):
        out.add_column(header, justify="right", overflow="fold")
    for load in keys:
        full = load.key_limit is not None and load.running >= load.key_limit
        out.add_row(
            Text(printable(load.key), style="bold"),
            Text(str(load.running), style="bold" if full else ""),
            str(load.ready),
            str(load.pending),
            _limit(load),
        )
    return out


def keys_listing(keys: tuple[KeyLoad, ...]) -> Group:
    """``keys_table`` for a narrow terminal: a key a line, then its numbers indented."""
    lines = [Text(KEYS_TITLE, style="bold")]
    for load in keys:
        lines.append(Text(printable(load.key), style="bold", overflow="fold"))
        lines.append(
            Text(
                f"  running {load.running}  ready {load.ready}  pending {load.pending}"
                f"  limit {_limit(load)}"
            )
        )
    return Group(*lines)


def _natural_width(out: Table) -> int:
    """How wide ``out`` is with nothing folded."""
    console = Console(width=10_000)
    return Measurement.get(console, console.options, out).maximum


def show(reading: Reading, alerts: Alerts, width: int = 10_000) -> Group:
    """One database: its tables, as ever. Several: each database's under its name, and a
    database that could not be read as one line naming it and the error."""
    if len(reading) == 1 and isinstance(reading[0][1], Stats):
        return render(reading[0][1], alerts, width)
    parts: list[Group | Text] = []
    for database, part in reading:
        if isinstance(part, Down):
            parts.append(Text(printable(part.line()), style="bold red"))
        else:
            parts += [Text(f"database {database}", style="bold"), render(part, alerts, width)]
    return Group(*parts)


def print_tables(reading: Reading, alerts: Alerts) -> None:
    """``show`` once, as wide as the terminal."""
    console = Console()
    console.print(show(reading, alerts, console.width))


def watch(read: Callable[[], Reading], every_s: float, alerts: Alerts) -> None:
    """The tables redrawn in place every ``every_s`` seconds, until Ctrl-C."""
    console = Console()
    with Live(show(read(), alerts, console.width), console=console, auto_refresh=False) as live:
        while True:
            time.sleep(every_s)
            live.update(show(read(), alerts, console.width), refresh=True)
