"""The words of what is forgotten, removed from every table (issue 39 item 2).

The tables are read from the catalogue, not listed here: a table a later migration adds
is scrubbed too, and the test that checks "nothing is left" reads the same catalogue
(tests/test_forget_everything.py). Per table:

- rows removed (`REMOVED`): the rows that are only about a forgotten thing — scratch rows
  and the held items on them, DMN items, consolidation findings and clusters, near-miss
  queue rows and approvals that name a removed memory or hold the words. (Links, co-access
  pairs, recall outcomes, uses, promotions, decay marks and productive contradictions
  follow the memory by their foreign keys.)
- every other table keeps its rows: a text column holding the words becomes the
  placeholder of its size (src/erasure/placeholder.py; sql/156 `forgotten_placeholder`),
  a JSON column has each string holding them replaced the same way (sql/156 `scrub_json`),
  a text array each element. Counters and ids stay true: a thought_log row still says a
  cycle happened, with what it cost.
- `memories` itself (the rows kept): a compressed line, a contextualised text or the
  conversation before a turn that holds the words is cleared (the compressed line goes
  back to the gate's own when that one is clean), its metadata scrubbed; a memory whose
  vector was of such a text is left unembedded, and the re-embed worker embeds it again.

"Holds the words": contains one of the needles (src/erasure/placeholder.py `needles`),
compared lower-cased. Table and column names come from the catalogue and are quoted as
identifiers; every value is a bound parameter.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import asyncpg

#: Never scrubbed here: the memory store (below, by rule), the migrations' record, and the
#: forget's own audit tables (they hold no words).
SKIP = frozenset({"memories", "schema_migrations", "forget_receipts", "forgotten_contents"})

#: Tables whose rows are removed when they hold the words, with the condition under which a
#: row names a removed memory ($2: the removed ids). held_memories goes first: its rows
#: point at scratch rows.
REMOVED: dict[str, str] = {
    "held_memories": "scratch_id IN (SELECT id FROM scratch_buffer b WHERE {holds_b})",
    "scratch_buffer": "false",
    "dmn_items": "memory_ids && $2::bigint[]",
    "consolidation_findings": "memory_ids && $2::bigint[]",
    "consolidation_clusters": "member_ids && $2::bigint[] OR insight_id = ANY($2::bigint[])",
    "near_miss_pending": "memory_ids && $2::bigint[]",
    "approvals": "(payload->>'memory_id') ~ '^[0-9]+$' AND (payload->>'memory_id')::bigint = ANY($2::bigint[])",
}

_COLUMNS = """
SELECT c.table_name, c.column_name, c.data_type, c.udt_name
  FROM information_schema.columns c
  JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
 WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'
   AND (c.data_type IN ('text', 'character varying', 'jsonb', 'json') OR c.udt_name IN ('_text', '_varchar'))
   AND c.is_generated = 'NEVER'
 ORDER BY c.table_name, c.ordinal_position
"""


def ident(name: str) -> str:
    """A catalogue name quoted as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _holds(expr: str) -> str:
    """SQL: `expr` (text) contains one of the needles ($1, lower-cased)."""
    return f"EXISTS (SELECT 1 FROM unnest($1::text[]) AS n WHERE strpos(lower({expr}), n) > 0)"


def _column_holds(name: str, kind: str, alias: str = "") -> str:
    col = alias + ident(name)
    if kind == "array":
        return f"EXISTS (SELECT 1 FROM unnest({col}) AS e WHERE {_holds('e')})"
    return _holds(f"{col}::text" if kind == "json" else col)


def _column_scrubbed(name: str, kind: str) -> str:
    col = ident(name)
    if kind == "json":
        return f"scrub_json({col}, $1)"
    if kind == "array":
        return (f"ARRAY(SELECT CASE WHEN {_holds('e')} THEN forgotten_placeholder(e) ELSE e END "
                f"FROM unnest({col}) WITH ORDINALITY AS u(e, o) ORDER BY o)")
    return f"CASE WHEN {_holds(col)} THEN forgotten_placeholder({col}) ELSE {col} END"


def _kind(data_type: str, udt: str) -> str:
    if data_type in ("jsonb", "json"):
        return "json"
    return "array" if udt in ("_text", "_varchar") else "text"


async def text_columns(conn: asyncpg.Connection) -> dict[str, list[tuple[str, str]]]:
    """{table: [(column, text|json|array)]} of every public table, from the catalogue."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for r in await conn.fetch(_COLUMNS):
        out[r["table_name"]].append((r["column_name"], _kind(r["data_type"], r["udt_name"])))
    return dict(out)


async def scrub_tables(conn: asyncpg.Connection, needles: Sequence[str], removed: Sequence[int],
                       *, dry_run: bool = False) -> dict[str, dict[str, int]]:
    """Remove or scrub every row outside `memories` that holds the needles or names a removed
    memory; {table: {"deleted": n, "scrubbed": n}} for the tables touched. With `dry_run`,
    the rows are counted, nothing is written."""
    columns = await text_columns(conn)
    low = [n.lower() for n in needles]
    ids = [int(i) for i in removed]
    counts: dict[str, dict[str, int]] = {}
    order = [t for t in REMOVED if t in columns or t == "held_memories"]
    order += [t for t in sorted(columns) if t not in REMOVED and t not in SKIP]
    for table in order:
        cols = columns.get(table, [])
        holds = " OR ".join(_column_holds(c, k) for c, k in cols) or "false"
        if table in REMOVED:
            names = REMOVED[table].format(holds_b=" OR ".join(
                _column_holds(c, k, "b.") for c, k in columns.get("scratch_buffer", [])) or "false")
            where = f"({holds}) OR ({names})"
            n = await _count_or_run(conn, table, where, low, ids, dry_run, delete=True)
            if n:
                counts[table] = {"deleted": n}
            continue
        if not cols:
            continue
        sets = ", ".join(f"{ident(c)} = {_column_scrubbed(c, k)}" for c, k in cols)
        n = await _count_or_run(conn, table, holds, low, ids, dry_run, sets=sets)
        if n:
            counts[table] = {"scrubbed": n}
    return counts


#: A scrub's statement; its parts are catalogue names quoted as identifiers and fixed SQL.
_UPDATE = "UPDATE {table} SET {sets} WHERE {where}"


async def _count_or_run(conn: asyncpg.Connection, table: str, where: str, low: list[str], ids: list[int],
                        dry_run: bool, *, delete: bool = False, sets: str = "") -> int:
    uses_ids = "$2" in where
    args = [low, ids] if uses_ids else [low]
    if dry_run:
        return await conn.fetchval(f"SELECT count(*) FROM {ident(table)} WHERE {where}", *args)
    if delete:
        status = await conn.execute(f"DELETE FROM {ident(table)} WHERE {where}", *args)
    else:
        status = await conn.execute(_UPDATE.format(table=ident(table), sets=sets, where=where), *args)
    return int(status.split()[-1])


_MEMORY_COLUMNS = f"""
UPDATE memories m SET
    compressed = CASE WHEN NOT {_holds('m.compressed')} THEN m.compressed
                      WHEN {_holds("m.metadata->>'gate_compressed'")} THEN NULL
                      ELSE m.metadata->>'gate_compressed' END,
    content_contextualized = CASE WHEN {_holds('m.content_contextualized')} THEN NULL
                                  ELSE m.content_contextualized END,
    conversation_context = CASE WHEN {_holds('m.conversation_context')} THEN NULL
                                ELSE m.conversation_context END,
    embedding = CASE WHEN {_holds('m.content_contextualized')} THEN NULL ELSE m.embedding END,
    embed_model = CASE WHEN {_holds('m.content_contextualized')} THEN NULL ELSE m.embed_model END,
    metadata = scrub_json(m.metadata, $1)
 WHERE NOT m.id = ANY($2::bigint[])
   AND ({_holds('m.compressed')} OR {_holds('m.content_contextualized')}
        OR {_holds('m.conversation_context')} OR {_holds('m.metadata::text')})
"""


async def scrub_kept_memories(conn: asyncpg.Connection, needles: Sequence[str], removed: Sequence[int],
                              *, dry_run: bool = False) -> int:
    """Clear the words from the memories kept (see the module docstring); how many rows."""
    low = [n.lower() for n in needles]
    if dry_run:
        where = _MEMORY_COLUMNS.split(" WHERE ", 1)[1]
        return await conn.fetchval(f"SELECT count(*) FROM memories m WHERE {where}", low, [int(i) for i in removed])
    status = await conn.execute(_MEMORY_COLUMNS, low, [int(i) for i in removed])
    return int(status.split()[-1])
