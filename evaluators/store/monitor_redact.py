"""A monitoring project's redaction settings and tokens (evaluators/monitor/redact.py checks the settings and finds
the values; this keeps them).

A token is numbered once per scope (a trace, or a conversation) and value: ``monitor_redactions`` holds, per
(project, scope, digest of the value), its label and number, so the same value is the same token in every trace
of a conversation, whichever assembler maps it. The value itself (``original``) is written only while the project
keeps originals, and taken out of every row when it stops; exports and the dashboard read none of this table.
"""
from __future__ import annotations

import secrets
from typing import Any

from sqlalchemy import Integer, String, Text, UniqueConstraint, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from evaluators.core.errors import UsageError
from evaluators.store.schema import Base
from evaluators.store.traces import MonitorProjectRow


class MonitorRedactionRow(Base):
    __tablename__ = "monitor_redactions"
    project: Mapped[str] = mapped_column(String(200), primary_key=True)
    scope: Mapped[str] = mapped_column(String(80), primary_key=True)  # t:<trace id> | c:<digest of the conversation>
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)  # HMAC-SHA256 of the value, project's secret
    label: Mapped[str] = mapped_column(String(40))  # EMAIL, PHONE, CARD or a pattern's name
    number: Mapped[int] = mapped_column(Integer)  # the token is [LABEL_number]
    original: Mapped[str | None] = mapped_column(Text, nullable=True)  # only while the project keeps originals
    __table_args__ = (UniqueConstraint("project", "scope", "label", "number", name="uq_monitor_redactions_token"),)


def token(label: str, number: int) -> str:
    return f"[{label}_{number}]"


class MonitorRedactMixin:
    """Redaction's reads and writes of :class:`evaluators.store.store.Store`."""

    def set_monitor_redaction(self, project: str, kinds: list[str] | None = None,
                              patterns: dict[str, str] | None = None, keep_original: bool | None = None,
                              conversation_quiet_seconds: float | None = None) -> None:
        """Set what is given (each replaces the project's): the kinds and patterns redacted (checked by the caller:
        :func:`evaluators.monitor.redact.set_project`), whether originals are kept (turned off, those kept are
        removed in the same transaction) and the conversations' quiet period."""
        if conversation_quiet_seconds is not None and not conversation_quiet_seconds >= 0:
            raise UsageError(f"--conversation-quiet-seconds must be 0 or more, not {conversation_quiet_seconds}")
        with self.session() as s:
            p = s.get(MonitorProjectRow, project)
            if p is None:
                raise UsageError(f"no project {project!r} (monitor token create --project NAME makes one)")
            if kinds is not None:
                p.redact_kinds = list(kinds)
            if patterns is not None:
                p.redact_patterns = dict(patterns)
            if (p.redact_kinds or p.redact_patterns) and not p.redact_secret:
                p.redact_secret = secrets.token_hex(32)
            if keep_original is not None:
                p.keep_original = keep_original
                if not keep_original:
                    s.execute(update(MonitorRedactionRow).where(MonitorRedactionRow.project == project,
                                                                MonitorRedactionRow.original.is_not(None))
                              .values(original=None))
            if conversation_quiet_seconds is not None:
                p.conversation_quiet_seconds = conversation_quiet_seconds
            s.commit()

    def redaction_settings(self, project: str) -> dict[str, Any]:
        """kinds, patterns, keep_original and secret of a project's redaction (none for an unknown project)."""
        with self.session() as s:
            p = s.get(MonitorProjectRow, project)
            if p is None:
                return {"kinds": [], "patterns": {}, "keep_original": False, "secret": ""}
            return {"kinds": list(p.redact_kinds or []), "patterns": dict(p.redact_patterns or {}),
                    "keep_original": bool(p.keep_original), "secret": p.redact_secret or ""}

    def redaction_tokens(self, project: str, scope: str, values: list[tuple[str, str, str]],
                         keep_original: bool = False) -> dict[str, str]:
        """The token of each (digest, label, value) in ``scope``, numbering new ones after the scope's others of
        their label; the value stored with it only with ``keep_original``. Two assemblers numbering in one scope
        at once: one's insert meets the other's token (unique), rolls back and numbers again from what is stored."""
        r = MonitorRedactionRow
        for _ in range(20):
            with self.session() as s:
                have = {d: (label, n) for d, label, n in s.execute(select(r.digest, r.label, r.number).where(
                    r.project == project, r.scope == scope))}
                top: dict[str, int] = {}
                for label, n in have.values():
                    top[label] = max(top.get(label, 0), n)
                for d, label, value in values:
                    if d not in have:
                        top[label] = top.get(label, 0) + 1
                        have[d] = (label, top[label])
                        s.add(r(project=project, scope=scope, digest=d, label=label, number=top[label],
                                original=value if keep_original else None))
                try:
                    s.commit()
                except IntegrityError:
                    s.rollback()
                    continue
            return {d: token(label, n) for d, (label, n) in have.items()}
        raise RuntimeError(f"could not number the redaction tokens of {scope} (20 tries, each taken meanwhile)")

    def redaction_originals(self, project: str, scope: str) -> dict[str, str]:
        """token -> the value it replaced in ``scope``, for a project that keeps originals (UsageError otherwise)."""
        with self.session() as s:
            p = s.get(MonitorProjectRow, project)
            if p is None or not p.keep_original:
                raise UsageError(f"project {project!r} does not keep the values it redacts (monitor project "
                                 "--keep-original)")
            r = MonitorRedactionRow
            return {token(label, n): v for label, n, v in s.execute(select(r.label, r.number, r.original).where(
                r.project == project, r.scope == scope, r.original.is_not(None)))}
