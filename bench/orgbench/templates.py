"""OrgBench's template mini-language: "{slot}" is filled from the environment, "[a|b|]" picks one
alternative (an empty one is allowed).

Owns compiling a template into a tree (:func:`compile_template`, once per template), rendering it with
a slot getter and a chooser (:func:`render`), and tidying the rendered sentence. Imports only
the standard library; never the generator's other modules.
"""

from __future__ import annotations


def compile_template(s: str):
    pos = 0
    n = len(s)

    def seq(stops: str):
        nonlocal pos
        parts: list = []
        buf: list[str] = []
        while pos < n:
            c = s[pos]
            if c in stops:
                break
            if c == "[":
                if buf:
                    parts.append("".join(buf))
                    buf = []
                pos += 1
                alts = [seq("|]")]
                while pos < n and s[pos] == "|":
                    pos += 1
                    alts.append(seq("|]"))
                if pos >= n or s[pos] != "]":
                    raise ValueError(f"unbalanced [ in template {s!r}")
                pos += 1
                parts.append(alts)
            elif c == "{":
                end = s.index("}", pos)
                if buf:
                    parts.append("".join(buf))
                    buf = []
                parts.append((s[pos + 1:end],))
                pos = end + 1
            else:
                buf.append(c)
                pos += 1
        if buf:
            parts.append("".join(buf))
        return tuple(parts)

    node = seq("")
    if pos != n:
        raise ValueError(f"unbalanced ] or | in template {s!r}")
    return node


def bank(items):
    return [compile_template(s) for s in items]


def render(node, get, choice) -> str:
    out = []
    for p in node:
        t = type(p)
        if t is str:
            out.append(p)
        elif t is tuple:
            out.append(get(p[0]))
        else:
            out.append(render(choice(p), get, choice))
    return "".join(out)


def tidy(s: str) -> str:
    if "  " in s:
        s = " ".join(s.split())
    if " ," in s:
        s = s.replace(" ,", ",")
    if " ." in s:
        s = s.replace(" .", ".")
    s = s.strip()
    if s and s[0].islower():
        s = s[0].upper() + s[1:]
    return s
