"""OrgBench's varied thread shapes (``--threads varied``): the same documents, threaded as other
organizations' records are.

The plain generator keeps every thread short (a chat burst, an email exchange of up to four
messages, a ticket and its comments), so a ranking tuned on it never meets a thread of more than
eight documents. Real exports often thread a chat by channel and period (a Slack channel's day or
month, mixing subjects), and let one discussion fork into several email threads. With
``threads="varied"`` each chat room of each organization takes one of three shapes, drawn once:

- ``burst`` (40%): as before, one thread per burst of messages;
- ``month`` (40%): one thread per room and calendar month;
- ``quarter`` (20%): one thread per room and quarter (dozens of messages on many subjects);

and each email thread of three or more messages forks, with probability 0.3, into two threads
from a random reply on (the later messages under a new thread id). Only ``thread`` changes; texts,
dates, authors and questions are the plain generator's. The draws come from their own stream
(seeded from the seed and the organization), so the plain benchmark's bytes do not change.
"""

from __future__ import annotations

import random

SHAPES = (("burst", 0.4), ("month", 0.4), ("quarter", 0.2))
FORK_SHARE = 0.3


def vary_threads(out_docs: list[dict], seed: int, scope: str) -> None:
    """Re-thread ``out_docs`` (one organization's, in ingest order) in place, as the module says."""
    r = random.Random(f"orgbench-shapes/{seed}/{scope}")
    shape: dict[str, str] = {}
    for d in out_docs:
        if d["channel"] != "chat" or not d.get("thread"):
            continue
        room = d["thread"].split("/")[0]
        if room not in shape:
            shape[room] = r.choices([s for s, _ in SHAPES], [w for _, w in SHAPES])[0]
        day = d["date"][:10]  # YYYY-MM-DD
        if shape[room] == "month":
            d["thread"] = f"{room}/{day[:7]}"
        elif shape[room] == "quarter":
            d["thread"] = f"{room}/{day[:4]}-Q{(int(day[5:7]) - 1) // 3 + 1}"
    emails: dict[str, list[dict]] = {}
    for d in out_docs:
        if d["channel"] == "email" and d.get("thread"):
            emails.setdefault(d["thread"], []).append(d)
    for thread, docs in sorted(emails.items()):
        if len(docs) >= 3 and r.random() < FORK_SHARE:
            cut = r.randint(1, len(docs) - 1)
            for d in docs[cut:]:
                d["thread"] = f"{thread}-fork"
