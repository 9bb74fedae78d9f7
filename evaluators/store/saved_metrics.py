"""Metrics saved in the store for the whole team (``metrics add``, the dashboard's New metric page): each save
of a changed definition is a new version; runs record the version they used (``RunSpec.definitions``), so
old runs keep theirs. Table ``saved_metrics``, on the store's metadata (created with the others)."""
from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Integer, String, Text, func, select
from sqlalchemy.orm import Mapped, mapped_column

from evaluators.core.errors import UsageError
from evaluators.core.registry import MetricSpec, register
from evaluators.metrics.custom import TEXT_FORMATS, check_renders, specs_from_text
from evaluators.store.schema import Base, utcnow


class SavedMetricRow(Base):
    __tablename__ = "saved_metrics"
    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    format: Mapped[str] = mapped_column(String(20))  # template | prompty | openai_grader
    text: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str | None] = mapped_column(String(200), nullable=True)


FIELDS = ("name", "version", "format", "text", "description", "created_at", "created_by")


def _dict(r: SavedMetricRow) -> dict[str, Any]:
    return {k: getattr(r, k) for k in FIELDS}


def saved_spec(d: dict[str, Any]) -> MetricSpec:
    """The metric of a saved version (its ``definition`` says which)."""
    return specs_from_text(d["text"], d["format"], f"store:{d['name']}", str(d["version"]), d["name"])[0]


class SavedMetricsMixin:
    """Saved metrics' reads and writes of :class:`evaluators.store.store.Store` (which provides ``session``)."""

    def save_metric(self, text: str, fmt: str, created_by: str | None = None, name: str | None = None) -> dict[str, Any]:
        """Check a definition and store it: version 1 of a new name, the next version of a known one, or the
        latest version unchanged when its text is the same. Returns the saved version's dict.

        Raises:
            UsageError: a definition that does not load (its message names the line and key) or whose trial render
                on a sample row stops at a bound (:func:`evaluators.metrics.custom.check_renders`), a grader file
                with several graders (save them one by one), or a built-in's name.
        Args:
            name: a name for a Prompty or grader file's metric (the SDK's ``coherence.prompty`` as ``sdk_coherence``).
        """
        if fmt not in TEXT_FORMATS:
            raise UsageError(f"the store keeps template, prompty and openai_grader definitions, not {fmt!r} "
                             "(a code metric lives in its Python file or package)")
        specs = specs_from_text(text, fmt, "the definition", name=name)
        if len(specs) != 1:
            raise UsageError(f"the file defines {len(specs)} metrics; save one grader a file")
        spec = specs[0]
        check_renders(spec)  # a template that loops or grows without end is refused here, not found on a run's rows
        from evaluators.core.registry import all_metrics

        if any(m.name == spec.name and m.definition is None for m in all_metrics()):
            raise UsageError(f"'{spec.name}' is a built-in metric's name; name yours otherwise")
        with self.session() as s, s.begin():
            latest = s.scalars(select(SavedMetricRow).where(SavedMetricRow.name == spec.name)
                               .order_by(SavedMetricRow.version.desc()).limit(1)).first()
            if latest is not None and latest.text == text and latest.format == fmt:
                return _dict(latest)
            row = SavedMetricRow(name=spec.name, version=(latest.version + 1) if latest else 1, format=fmt,
                                 text=text, description=spec.description, created_by=created_by)
            s.add(row)
            s.flush()
            out = _dict(row)
        register(saved_spec(out), replace=True)
        return out

    def saved_metrics(self) -> list[dict[str, Any]]:
        """The latest version of every saved metric, by name."""
        with self.session() as s:
            last = (select(SavedMetricRow.name, func.max(SavedMetricRow.version).label("v"))
                    .group_by(SavedMetricRow.name).subquery())
            rows = s.scalars(select(SavedMetricRow).join(
                last, (SavedMetricRow.name == last.c.name) & (SavedMetricRow.version == last.c.v))
                .order_by(SavedMetricRow.name)).all()
            return [_dict(r) for r in rows]

    def saved_metric(self, name: str, version: int | None = None) -> dict[str, Any]:
        """One saved version (the latest without ``version``). Raises UsageError naming what is known."""
        with self.session() as s:
            q = select(SavedMetricRow).where(SavedMetricRow.name == name)
            q = q.where(SavedMetricRow.version == version) if version else q.order_by(SavedMetricRow.version.desc())
            row = s.scalars(q.limit(1)).first()
            if row is None:
                known = ", ".join(r["name"] for r in self.saved_metrics()) or "none"
                raise UsageError(f"no saved metric '{name}'" + (f" version {version}" if version else "")
                                 + f" (saved: {known})")
            return _dict(row)

    def saved_metric_versions(self, name: str) -> list[int]:
        with self.session() as s:
            return list(s.scalars(select(SavedMetricRow.version).where(SavedMetricRow.name == name)
                                  .order_by(SavedMetricRow.version)))

    def register_saved_metrics(self) -> list[str]:
        """Put the latest version of every saved metric in this process's registry (pickers, runs); a saved
        metric that no longer loads (or takes a built-in's name) is left out, not fatal. Returns their names."""
        names = []
        for d in self.saved_metrics():
            try:
                register(saved_spec(d), replace=True)
                names.append(d["name"])
            except UsageError:
                continue
        return names
