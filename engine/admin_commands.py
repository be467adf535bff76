"""The administrator's subcommands: a store's health (``mempp verify``, ``mempp repair``) and who
may read what (``mempp members``, ``mempp readers``).

Owns those subcommands' work; their parsers are ``cli``'s. Every permission change is one commit
(``Store.add_members``, ``remove_members``, ``set_readers``).

Never imports: planner, writer, mempp.storage, onnxruntime.
"""

from __future__ import annotations

import argparse
import json

from .access import named_docs
from .errors import ValidationError


def _report(report: dict, as_json: bool, actions: bool = False) -> int:
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        for a in report.get("actions", []) if actions else []:
            print(f"repair: {a}")
        for p in report["problems"]:
            print(f"{p['kind']}: {p['file']}: {p['problem']}")
        state = "clean" if report["clean"] else "damaged"
        where = f"version {report['version']}" if report["version"] is not None else "no readable CURRENT"
        best = f"; newest whole version on disk: {report['newest_whole']}" if report.get("newest_whole") is not None else ""
        print(f"{report['store']}: {state} ({where}, {report['files']} files checked{best})")
    return 0 if report["clean"] else 1


def cmd_verify(args: argparse.Namespace) -> int:
    from .store import verify

    return _report(verify(args.store), args.json)


def cmd_repair(args: argparse.Namespace) -> int:
    from .store import repair

    return _report(repair(args.store, rollback=args.rollback, lock_timeout=args.wait), args.json, actions=True)


def cmd_members(args: argparse.Namespace) -> int:
    """``mempp members STORE GROUP [--add P ...] [--remove P ...]``: change a group, then print its members."""
    from .store import Store

    with Store.open(args.store, create=False, read_only=not (args.add or args.remove), lock_timeout=args.wait) as store:
        if args.add:
            store.add_members(args.group, args.add)
        if args.remove:
            store.remove_members(args.group, args.remove)
        members = sorted(store.searcher().access().members.get(args.group, ()))
    print(json.dumps({"group": args.group, "members": members, "version": store.version}) if args.json
          else f"{args.group}: {', '.join(members) if members else 'no members'}")
    return 0


def cmd_people(args: argparse.Namespace) -> int:
    """``mempp people STORE [FILE]``: add the people of FILE to the directory, then print it."""
    from .access import principal_arg
    from .store import Store

    with Store.open(args.store, create=False, read_only=args.file is None, lock_timeout=args.wait) as store:
        if args.file is not None:
            store.add_people(args.file)
        people = store.people(principal=principal_arg(args.principal))
    for person in people:
        roles = "; ".join(f"{r['role']} ({r['from'] or 'always'} to {r['to'] or 'now'})" for r in person["roles"])
        print(json.dumps(person) if args.json else f"{person['name']}" + (f"  aka {', '.join(person['aliases'])}" if person["aliases"] else "")
              + (f"  {roles}" if roles else ""))
    return 0


def cmd_readers(args: argparse.Namespace) -> int:
    """``mempp readers STORE ID [P ...] [--everyone]``: set who may read a document (every version of
    an id), then print its readers."""
    from .store import Store

    if args.principals and args.everyone:
        raise ValidationError("give principals or --everyone, not both", field="--everyone")
    change = bool(args.principals) or args.everyone
    with Store.open(args.store, create=False, read_only=not change, lock_timeout=args.wait) as store:
        ref = int(args.key) if args.key.isdigit() and not store.searcher().doc_ids(args.key) else args.key
        if change:
            store.set_readers(ref, None if args.everyone else args.principals)
        searcher = store.searcher()
        docs = named_docs(searcher, ref)
        access = searcher.access()
        out = [{"doc_id": d, "readers": None if access.readers.get(d) is None else list(access.readers[d])} for d in docs]
    for row in out:
        print(json.dumps(row) if args.json else f"{row['doc_id']:>6}  {'everyone' if row['readers'] is None else ', '.join(row['readers']) or 'nobody (admin only)'}")
    return 0


def cmd_erase(args: argparse.Namespace) -> int:
    """``mempp erase STORE ID ... --reason TEXT`` (or ``--before DATE [--channel C]``; ``--list``)."""
    from .store import Store

    if args.list:
        with Store.open(args.store, create=False, read_only=True) as store:
            rows = [dict(r, erased_at=r["erased_at"].isoformat()) for r in store.erasures()]
        for r in rows:
            print(json.dumps(r) if args.json else f"{r['doc_id']:>6}  {r['key'] or '-'}  {r['erased_at']}  {r['reason']}")
        return 0
    if bool(args.key) == (args.before is not None):
        raise ValidationError("give the ids to erase, or --before DATE, not both", field="key")
    if args.channel is not None and args.before is None:
        raise ValidationError("--channel goes with --before", field="--channel")
    with Store.open(args.store, create=False, lock_timeout=args.wait) as store:
        if args.before is not None:
            out = store.erase_before(args.before, reason=args.reason, channel=args.channel)
        else:
            searcher = store.searcher()
            refs = [int(k) if k.isdigit() and not searcher.doc_ids(k) else k for k in args.key]
            out = store.erase(refs, reason=args.reason)
    print(json.dumps(out) if args.json else
          f"{args.store}: erased {len(out['erased'])} document(s) in version {out['version']}; "
          f"{len(out['files_removed'])} file(s) rewritten and the old ones removed ({out['seconds']} s)")
    return 0
