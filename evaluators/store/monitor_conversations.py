"""Conversations of a monitoring project (evaluators/monitor/conversations.py assembles them): a conversation is a
row of ``monitor_traces`` of kind ``conversation``, whose id is derived from its key (:func:`conversation_id`), so
that rules decide and judge it as they do a trace. Its turns (traces of kind ``trace``) name it in
``in_conversation``; a trace of the conversation mapped after it was assembled is marked ``late`` and left out.
"""
from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

from sqlalchemy import func, select, update

from evaluators.store.schema import utcnow
from evaluators.store.traces import MonitorTraceRow


def conversation_id(project: str, key: str) -> str:
    """The 32-hex id of a conversation's row: a trace id no real trace has (a digest of project and key)."""
    return hashlib.sha256(f"conversation\0{project}\0{key}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


class MonitorConversationsMixin:
    """Conversations' reads and writes of :class:`evaluators.store.store.Store`."""

    def due_conversations(self, project: str, quiet_before: dt.datetime, limit: int = 200) -> list[str]:
        """Keys of conversations with turns in no row yet (none marked late) whose last turn was mapped before
        ``quiet_before``: a conversation to assemble, or one assembled whose late turns are to be marked. (Read
        through ``ix_monitor_traces_turns``: only such turns, not every trace; a conversation's row names itself.)"""
        t = MonitorTraceRow
        q = (select(t.conversation_key).where(t.project == project, t.late.is_(False), t.in_conversation.is_(None),
                                              t.conversation_key.is_not(None), t.kind == "trace", t.status == "mapped")
             .group_by(t.conversation_key).having(func.max(t.mapped_at) < quiet_before)
             .order_by(func.max(t.mapped_at)).limit(limit))
        with self.session() as s:
            return list(s.scalars(q))

    def conversation_turns(self, project: str, key: str) -> list[dict[str, Any]]:
        """The mapped traces of a conversation not yet in its row, in start order: trace_id, start_ns, fields,
        sources, content, first_seen, last_seen."""
        t = MonitorTraceRow
        q = (select(t.trace_id, t.start_ns, t.fields, t.sources, t.content, t.first_seen, t.last_seen)
             .where(t.project == project, t.kind == "trace", t.status == "mapped", t.conversation_key == key,
                    t.in_conversation.is_(None))
             .order_by(func.coalesce(t.start_ns, 0), t.trace_id))
        with self.session() as s:
            return [dict(r._mapping) for r in s.execute(q)]

    def save_conversation(self, project: str, key: str, turns: list[dict[str, Any]], *, fields: dict,
                          sources: dict, content: bool, hint: str) -> str | None:
        """Store a conversation's row from its ``turns`` (as :meth:`conversation_turns` gave them) and mark them its
        turns, in one transaction; when its row is there already, mark them late. Returns the row's id, or None
        when it was there (made earlier, or by another assembler meanwhile)."""
        t = MonitorTraceRow
        cid = conversation_id(project, key)
        now = utcnow()
        starts = [x["start_ns"] for x in turns if x["start_ns"] is not None]
        row = {"project": project, "trace_id": cid, "kind": "conversation", "status": "mapped", "mapped_at": now,
               "completeness": "complete", "first_seen": min(x["first_seen"] for x in turns),
               "last_seen": max(x["last_seen"] for x in turns), "receipts": len(turns), "root_ended": True,
               "start_ns": min(starts) if starts else None, "fields": fields, "sources": sources, "content": content,
               "hint": hint, "conversation_key": key, "late": False, "in_conversation": cid}
        with self.engine.begin() as conn:
            made = conn.execute(self._insert_ignore(t.__table__).values(**row).returning(t.trace_id)).first()
            ids = [x["trace_id"] for x in turns]
            # made: these are its turns; there already (RETURNING, not rowcount: the PostgreSQL driver's is not the
            # rows inserted here): they came after it was made, and are marked late, not added
            conn.execute(update(t).where(t.project == project, t.trace_id.in_(ids), t.in_conversation.is_(None))
                         .values(**({"in_conversation": cid} if made else {"late": True})))
        return cid if made else None
