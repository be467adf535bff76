"""Supersessions recorded on their own: :meth:`SupersedePath.supersede` and ``supersede_many``.

Owns the rules a supersession must pass before it is written (both documents exist, no
document supersedes itself, the replacement is not itself superseded by then, and, unless
``backdate=True``, the effective date is not before either document's own date) and the
supersession-only commit. Supersessions that come with new documents (a re-used id, a
``supersedes`` field) are ``writes.py``'s; validity at a date is ``candidates.py``'s.

Never imports: reads, planner, fusion, lexical, vector, merging, onnxruntime.
"""

from __future__ import annotations

from typing import Any, Iterable

from mempp.storage import FOREVER, NAT, CommitBatch, now_us

from .dates import iso, to_us
from .errors import DocumentNotFound, ValidationError
from .writes import _one_writer_thread


class SupersedePath:
    """The supersession methods of a :class:`~mempp.Store` (a mixin beside :class:`~mempp.writes.WritePath`)."""

    def supersede(self, old: str | int, new: str | int, effective: Any = None, *, backdate: bool = False) -> None:
        """Record that ``new`` replaces ``old`` from ``effective`` on (default: ``new``'s date).

        ``old`` and ``new`` are keys (the active version) or doc ids. Nothing is deleted:
        ``old`` stays the answer for questions as of dates before ``effective``.

        Refused (``ValidationError``, nothing written), so that a record never loses every
        version where it had one:
        - ``new`` is itself superseded at or before ``effective`` (a cycle, or a replacement
          already replaced): from then on neither would be valid;
        - ``effective`` is before ``old``'s own date (``old`` would never have been valid) or
          before ``new``'s (neither would be valid in between), unless ``backdate=True``.
        A mistaken supersession is corrected by adding a new version, never by deleting one.
        """
        self._supersede([(old, new, effective)], many=False, backdate=backdate)

    def supersede_many(self, events: Iterable[tuple], *, backdate: bool = False) -> None:
        """Record many supersessions ``(old, new[, effective])`` as one commit (all or none).

        Each event as in :meth:`supersede` (checked against the ones before it in the same
        call); the first bad one raises a ``ValidationError`` naming its index (``record``) and
        nothing is written.
        """
        self._supersede(events, many=True, backdate=backdate)

    @_one_writer_thread
    def _supersede(self, events: Iterable[tuple], many: bool, backdate: bool = False) -> None:
        self._check_writable()
        self._begin_write()
        recorded = now_us()
        out = []
        snap = self._snap
        ends: dict[int, int] = {}  # validity ends set by this call's earlier events
        for i, event in enumerate(events):
            if not isinstance(event, (tuple, list)) or len(event) not in (2, 3):
                raise ValidationError("expected (old, new) or (old, new, effective)", field="event", record=i)
            old, new, effective = (*event, None) if len(event) == 2 else event
            where = i if many else None
            try:
                old_id = self._resolve(old, "old")
                new_id = self._resolve(new, "new")
            except ValidationError as exc:
                raise ValidationError(exc.message, field=exc.field, record=where) from None
            except DocumentNotFound as exc:
                raise DocumentNotFound(f"event {i}: {exc}" if many else str(exc)) from None
            if old_id == new_id:
                raise ValidationError("a document cannot supersede itself", field="new", record=where)
            old_date, new_date = int(snap.dates[old_id]), int(snap.dates[new_id])
            if effective is None:
                eff = new_date if new_date != NAT else recorded
            else:
                try:
                    eff = to_us(effective)
                except (ValueError, TypeError, OverflowError) as exc:
                    raise ValidationError(f"cannot parse {effective!r} ({exc})", field="effective", record=where) from None
            new_end = min(int(snap.valid_until[new_id]), ends.get(new_id, FOREVER))
            if new_end <= eff:
                raise ValidationError(
                    f"{new!r} is itself superseded from {iso(new_end)}, so it cannot replace {old!r} from {iso(eff)}: "
                    "neither would be valid from then on (to correct a supersession, add a new version)",
                    field="new", record=where,
                )
            if not backdate:
                for name, when, field in ((old, old_date, "old"), (new, new_date, "new")):
                    if when != NAT and eff < when:
                        raise ValidationError(
                            f"effective {iso(eff)} is before {name!r}'s own date {iso(when)}: "
                            + ("it would never have been valid" if field == "old" else "neither would be valid in between")
                            + "; pass backdate=True if that is meant",
                            field="effective", record=where,
                        )
            ends[old_id] = min(ends.get(old_id, FOREVER), eff)
            out.append((old_id, new_id, eff, recorded))
        if out:
            self._commit(CommitBatch(supersessions=out))
