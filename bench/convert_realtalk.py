"""Convert REALTALK to ``shared/eval/FORMAT.md``: ``python -m mempp.bench.convert_realtalk --src DIR --out DIR``.

REALTALK (Lee, Maharana, Pujara, Ren, Barbieri, "REALTALK: A 21-Day Real-World Dataset for
Long-Term Conversation", 2025; the repository ``danny911kr/REALTALK`` on GitHub, files
``data/Chat_*.json``) holds ten real messaging-app conversations between people who did not
know each other, over 21 days, with memory-probing questions whose evidence is a list of
message ids: a conversational-memory benchmark with gold evidence and dates whose text was
written by people, not generated (LoCoMo's and our organizational generator's are).

**Licence: the repository states none.** This converter therefore only reads a copy the user
fetched (``--src``: the folder of ``Chat_*.json``) and writes to a folder the user names; no
REALTALK data is part of mempp, and the figures we report are for evaluation only.

Mapping:
- one document per message: ``id`` ``<chat>:<dia_id>``, ``scope`` the chat (file name without
  ``.json``), ``text`` the message's ``clean_text``, ``author`` its ``speaker``, ``date`` its own
  timestamp (``DD.MM.YYYY, HH:MM:SS`` -> ISO 8601), ``thread`` ``<chat>:session_<n>``, ``channel``
  ``chat``; messages with no text (a bare image) are left out, as an empty text is never stored;
- one question per ``qa`` entry: ``category`` 1 -> ``fact``, 2 -> ``temporal``, 3 -> ``inference``;
  ``as_of`` null; ``evidence`` the message ids as written, read leniently (``;`` or ``,``
  separated lists, ranges ``D12:3-D12:5`` within one session, stray spaces and dots); ids that
  name no message with text are dropped, and the counts are printed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

CATEGORIES = {1: "fact", 2: "temporal", 3: "inference"}
_ID = re.compile(r"D(\d+):(\d+)")


def parse_evidence(items: Sequence[str]) -> list[str]:
    """``["D1:3", "D12:3-D12:5;D13:1"]`` -> ``["D1:3", "D12:3", "D12:4", "D12:5", "D13:1"]`` (order kept, no repeats)."""
    out: list[str] = []
    for item in items:
        for part in re.split(r"[;,]", str(item)):
            ids = [(int(s), int(t)) for s, t in _ID.findall(part)]
            if len(ids) == 2 and "-" in part and ids[0][0] == ids[1][0] and ids[0][1] <= ids[1][1]:
                ids = [(ids[0][0], t) for t in range(ids[0][1], ids[1][1] + 1)]
            for s, t in ids:
                key = f"D{s}:{t}"
                if key not in out:
                    out.append(key)
    return out


def _iso(stamp: str) -> str:
    return datetime.strptime(stamp.strip(), "%d.%m.%Y, %H:%M:%S").isoformat()


def convert_chat(name: str, data: dict[str, Any]) -> tuple[list[dict], list[dict], dict[str, int]]:
    docs: list[dict] = []
    sessions = sorted((int(k.split("_")[1]), v) for k, v in data.items() if re.fullmatch(r"session_\d+", k) and isinstance(v, list))
    for n, turns in sessions:
        for t in turns:
            text = (t.get("clean_text") or "").strip()
            if not text:
                continue
            docs.append({
                "id": f"{name}:{t['dia_id']}", "scope": name, "text": text, "author": t.get("speaker"),
                "date": _iso(t["date_time"]) if t.get("date_time") else None, "thread": f"{name}:session_{n}", "channel": "chat",
            })
    have = {d["id"] for d in docs}
    questions: list[dict] = []
    counts = {"evidence_ids": 0, "dropped_ids": 0}
    for i, qa in enumerate(data.get("qa", [])):
        ev = [f"{name}:{e}" for e in parse_evidence(qa.get("evidence") or [])]
        kept = [e for e in ev if e in have]
        counts["evidence_ids"] += len(ev)
        counts["dropped_ids"] += len(ev) - len(kept)
        questions.append({
            "id": f"{name}:q{i}", "scope": name, "text": qa["question"], "category": CATEGORIES.get(qa.get("category"), str(qa.get("category"))),
            "as_of": None, "evidence": kept, "answer": str(qa.get("answer", "")),
        })
    return docs, questions, counts


def convert(src: str | Path, out: str | Path) -> dict[str, int]:
    src, out = Path(src), Path(out)
    files = sorted(src.glob("Chat_*.json"), key=lambda p: int(p.name.split("_")[1]))
    if not files:
        raise SystemExit(f"no Chat_*.json under {src} (the data/ folder of the REALTALK repository)")
    out.mkdir(parents=True, exist_ok=True)
    totals = {"scopes": 0, "docs": 0, "questions": 0, "scored": 0, "evidence_ids": 0, "dropped_ids": 0}
    with open(out / "docs.jsonl", "w", encoding="utf-8") as fd, open(out / "questions.jsonl", "w", encoding="utf-8") as fq:
        for f in files:
            docs, qs, counts = convert_chat(f.stem, json.loads(f.read_text(encoding="utf-8")))
            for d in docs:
                fd.write(json.dumps(d, ensure_ascii=False) + "\n")
            for q in qs:
                fq.write(json.dumps(q, ensure_ascii=False) + "\n")
            totals["scopes"] += 1
            totals["docs"] += len(docs)
            totals["questions"] += len(qs)
            totals["scored"] += sum(1 for q in qs if q["evidence"])
            for k in ("evidence_ids", "dropped_ids"):
                totals[k] += counts[k]
    (out / "SOURCE.md").write_text(
        "REALTALK (danny911kr/REALTALK on GitHub, data/Chat_*.json), converted by mempp's bench/convert_realtalk.py.\n"
        "The repository states no licence: evaluation only, do not redistribute.\n" + json.dumps(totals) + "\n"
    )
    return totals


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mempp.bench.convert_realtalk", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", required=True, help="the REALTALK repository's data/ folder (Chat_*.json)")
    p.add_argument("--out", required=True, help="output folder for docs.jsonl and questions.jsonl")
    args = p.parse_args(argv)
    print(json.dumps(convert(args.src, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
