"""Processes for the concurrency test (T7): a writer and a reader, run as ``python conc_worker.py ...``.

The writer's operations are a pure function of a seed (``operations``), so the test can
replay them into the temporal model up to any version a reader saw: every operation stores at
least one new document or one supersession, so it is one version; the writer's background
merges publish versions of their own (``kind`` "merge" in ``Store.versions()``), which hold
what the version before them held.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from typing import Iterator

VOCAB = ("sla", "uptime", "contract", "renewal", "budget", "approved", "vendor", "latency", "incident", "review")
AUTHORS = ("Aisha Patel", "Ben Okafor", None)
# as_of values the readers ask with; the oracle is computed once per (version, as_of).
AS_OFS = (None, "2020-06-30", "2021-03-01", "2021-12-31T12:00:00Z", "2022-07-01", "2023-01-01T00:00:00", "2023-12-31")
QUERY = "sla budget review"


def _day(rng: random.Random) -> str:
    return f"{rng.randint(2020, 2023)}-{rng.randint(1, 12):02d}-{rng.choice((1, 15, 28)):02d}"


def operations(seed: int) -> Iterator[tuple]:
    """``("add", [docs])`` or ``("supersede", old_key, new_key, effective)``, forever."""
    rng = random.Random(seed)
    keys: list[str] = []
    retired: set[str] = set()  # keys whose newest version is superseded: never a replacement (no cycles)
    # Each key's versions' dates (None: undated, after every dated one), so that no write is one
    # the rule refuses (README, Temporal rules): a supersedes only on a new dated document and
    # naming ids whose every version is dated before it, and no two versions of an id on one date.
    dates: dict[str, list[str | None]] = {}
    n = 0
    while True:
        live = [k for k in keys if k not in retired]
        if len(keys) >= 2 and live and rng.random() < 0.25:
            new = rng.choice(live)
            old = rng.choice([k for k in keys if k != new])
            retired.add(old)
            yield ("supersede", old, new, rng.choice((None, _day(rng))))
            continue
        batch = []
        for _ in range(rng.randint(1, 3)):
            n += 1
            fresh = not keys or rng.random() >= 0.3
            if fresh:
                key = f"k{n}"
                keys.append(key)
            else:
                key = rng.choice(keys)  # a new version of an existing key, dated before or after the others
            doc = {"id": key, "text": " ".join(rng.choices(VOCAB, k=rng.randint(1, 5))) + f" item{n}"}
            author = rng.choice(AUTHORS)
            if author:
                doc["author"] = author
            if rng.random() < 0.9:
                day = _day(rng)
                if day not in dates.get(key, ()):
                    doc["date"] = day
            seen = dates.setdefault(key, [])
            if doc.get("date") is None or (None not in seen and all(doc["date"] > d for d in seen)):
                retired.discard(key)  # the newest version: the active one
            seen.append(doc.get("date"))
            others = [k for k in keys if k != key and doc.get("date") and all(d is not None and d < doc["date"] for d in dates[k])]
            if fresh and others and rng.random() < 0.15:
                doc["supersedes"] = [rng.choice(others)]
                retired.update(doc["supersedes"])
            batch.append(doc)
        yield ("add", batch)


def run_writer(path: str, seed: int, seconds: float, pause: float) -> None:
    import mempp

    # Counted from the first acknowledged commit, when the test starts its clock: the start-up
    # before it (imports, the compiled kernels loaded, the first commit) took over 5 s on a loaded
    # machine, and the writer then ended while the test still expected it to hold the lock.
    deadline = math.inf
    with mempp.Store.open(path, embedder=mempp.HashEmbedder()) as store:
        for i, op in enumerate(operations(seed), 1):
            if op[0] == "add":
                store.add(op[1])
            else:
                store.supersede(op[1], op[2], effective=op[3], backdate=True)
            if store.version < i:  # merges in the background publish versions of their own
                raise SystemExit(f"writer: operation {i} gave version {store.version}")
            print(i, flush=True)  # acknowledged
            if i == 1:
                deadline = time.monotonic() + seconds
            if time.monotonic() > deadline:
                return
            time.sleep(pause)


def all_valid(store, as_of) -> tuple[int, list[int]]:
    """(version, doc ids) of every document valid at ``as_of`` in the version the query ran on."""
    hits = store.query(QUERY, as_of=as_of, k=10**9, depth=10**9, legs=["vector"], reserve=False)
    return hits.version, sorted(h.doc_id for h in hits)


def run_reader(path: str, seconds: float, out: str, seed: int) -> None:
    import mempp

    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    while True:  # wait for the first commit
        try:
            store = mempp.Store.open(path, read_only=True, create=False)
            break
        except mempp.StoreError:
            time.sleep(0.01)
    with store, open(out, "w") as f:
        i = 0
        while time.monotonic() < deadline:
            if i % 3 == 0:
                store.refresh()
            as_of = rng.choice(AS_OFS)
            version, ids = all_valid(store, as_of)
            f.write(json.dumps({"v": version, "as_of": as_of, "ids": ids}) + "\n")
            i += 1


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "writer":
        run_writer(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
    else:
        run_reader(sys.argv[2], float(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
