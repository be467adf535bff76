"""Changes of who may read what (a document's readers, a group's members; docs/DESIGN.md §8) and of who is who (the people directory, §9).

Each change is one commit of the store's access log (``access.py`` folds it; the writer commits
it), in the writer's turn, checked before anything is written.

Owns :class:`Permissions` (``Store.set_readers``, ``add_members``, ``remove_members``, ``add_people``).

Never imports: store, searcher, planner, onnxruntime.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator

from .access import check_group, check_readers, named_docs
from .errors import ValidationError
from .people import check_people, person_events


class Permissions:
    """The permission changes of one :class:`~mempp.Writer` (its ``permissions``)."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    @contextlib.contextmanager
    def _turn(self) -> Iterator[tuple[Any, Any]]:
        """The writer's turn on the newest version: ``(writer, the permissions it builds on)``."""
        w = self._writer
        with w.turn():
            w.check_writable()
            w.begin_write()
            yield w, w.access()

    def set_readers(self, ref: str | int, readers: Iterable[str] | None) -> None:
        """Who may read ``ref`` from now on (a key: every version of it; a doc id: that one): a list
        of ``"user:NAME"`` / ``"group:NAME"``; None: everyone. Applies to every version asked
        about, as every permission does. One commit; nothing when they are already so."""
        readers = check_readers(readers)
        with self._turn() as (w, access):
            docs = named_docs(w.searcher(), ref)
            w.commit_access(access, [{"op": "readers", "doc_id": d, "principals": readers} for d in docs if access.readers.get(d) != readers])

    def add_members(self, group: str, principals: Iterable[str]) -> None:
        """Add ``principals`` (users or groups) to ``group``; a group that would hold itself is refused."""
        self._members(group, principals, True)

    def remove_members(self, group: str, principals: Iterable[str]) -> None:
        """Remove ``principals`` from ``group`` (those not in it are left as they are)."""
        self._members(group, principals, False)

    def _members(self, group: str, principals: Iterable[str], add: bool) -> None:
        group = check_group(group)
        if isinstance(principals, (str, bytes)) or not isinstance(principals, Iterable):
            raise ValidationError(f"expected a list of principals, got {type(principals).__name__}", field="principals")
        principals = list(principals)
        with self._turn() as (w, access):
            got = access.check_members(group, principals, add)
            now = access.members.get(group, set())
            changed = [p for p in got if (p not in now) == add]
            if changed:
                w.commit_access(access, [{"op": "add_members" if add else "remove_members", "group": group, "principals": changed}])

    def add_people(self, people: Any) -> int:
        """Put ``people`` in the store's directory (``people.check_people``: records, or a file of
        them), each replacing the entry of the same name; one commit. Returns how many changed."""
        people = check_people(people)
        with self._turn() as (w, access):
            events = person_events(people, access.people)
            if events:
                w.commit_access(access, events)
        return len(events)
