#!/usr/bin/env python3
"""Checks that README.md and docs/*.md hold no dead relative link and no stale quote.

  scripts/check_doc_links.py [ROOT]            check ROOT (default: the repository)
  scripts/check_doc_links.py --self-check      first break a copy three ways and require
                                               that each copy fails, then check the repository

Every Markdown link [text](target) outside code whose target is not a URL must name a file
that exists (relative to the page), and its #anchor, if any, a heading of that file as GitHub
spells anchors (lower case, punctuation dropped, spaces as '-', repeats numbered -1, -2, …).

Numbers in the README are quoted, not retyped: a block quote there, "> “text” … — [page](…)
… (YYYY-MM-DD)", must quote text that the linked page holds (compared with Markdown emphasis
and line breaks removed), so a quote goes stale only together with its source, and give the
date it was measured. The README is a front door: at most 300 lines. The ctest test `doc_links`
runs this with --self-check. Exit status 0: all good; 1: each problem printed on its own line.
"""
import re
import shutil
import sys
import tempfile
import unicodedata
from pathlib import Path

LINK = re.compile(r"(?<!!)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
MAX_README_LINES = 300


def pages(root):
    return [root / "README.md"] + sorted((root / "docs").glob("*.md"))


def prose_lines(text):
    """(line number, line) outside fenced code, with inline code spans blanked."""
    fenced = False
    for n, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line)


def slug(heading):
    text = LINK.sub(lambda m: m.group(1), heading.strip())
    text = text.lower()
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LN" or cat == "Mn":
            out.append(ch)
    return "".join(out).replace(" ", "-")


def anchors(path):
    found, seen = set(), {}
    fenced = False
    for line in path.read_text(encoding="utf-8").split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if fenced or not m:
            continue
        base = slug(m.group(2))
        k = seen.get(base, 0)
        seen[base] = k + 1
        found.add(base if k == 0 else f"{base}-{k}")
    return found


def normalise(text):
    text = re.sub(r"\*\*|__", "", text)
    return " ".join(text.split())


def check_links(page, root, problems):
    text = page.read_text(encoding="utf-8")
    for n, line in prose_lines(text):
        for m in LINK.finditer(line):
            target = m.group(2)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path_part, _, anchor = target.partition("#")
            dest = page if not path_part else (page.parent / path_part)
            where = f"{page.relative_to(root)}:{n}"
            if not dest.exists():
                problems.append(f"{where}: link to '{target}': no file {path_part}")
                continue
            if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{where}: link to '{target}': {dest.relative_to(root)} has no "
                                f"heading with anchor #{anchor}")


def check_quotes(readme, root, problems):
    """Block quotes of the README: the text in “…” must be in the page the quote links."""
    lines = readme.read_text(encoding="utf-8").split("\n")
    n = 0
    while n < len(lines):
        if not lines[n].startswith(">"):
            n += 1
            continue
        start = n
        block = []
        while n < len(lines) and lines[n].startswith(">"):
            block.append(lines[n][1:].strip())
            n += 1
        joined = " ".join(block)
        quote = re.search(r"“(.+?)”", joined)
        source = re.search(r"—\s*\[[^\]]*\]\(([^)#]+)", joined)
        where = f"README.md:{start + 1}"
        if not quote or not source:
            problems.append(f"{where}: a block quote must be “quoted text” — [page](path)")
            continue
        dest = readme.parent / source.group(1)
        if not re.search(r"\b20\d\d-\d\d-\d\d\b", joined):
            problems.append(f"{where}: the quote gives no date (YYYY-MM-DD) of the measurement")
        if not dest.exists():
            problems.append(f"{where}: the quote's source {source.group(1)} does not exist")
        elif normalise(quote.group(1)) not in normalise(dest.read_text(encoding="utf-8")):
            problems.append(f"{where}: “{quote.group(1)[:60]}…” is not in {source.group(1)} "
                            "(quote the page as it is now)")


def check(root):
    problems = []
    for page in pages(root):
        check_links(page, root, problems)
    check_quotes(root / "README.md", root, problems)
    lines = (root / "README.md").read_text(encoding="utf-8").count("\n")
    if lines > MAX_README_LINES:
        problems.append(f"README.md: {lines} lines, more than {MAX_README_LINES}: move the "
                        "detail to a page in docs/ and link it")
    return problems


def self_check(root):
    """Three damaged copies, each of which must fail: a missing file, a missing anchor, a
    quote the source no longer holds."""
    breakages = [
        ("README.md", "](docs/usage.md)", "](docs/no-such-page.md)"),
        ("README.md", "](docs/building.md#measured)", "](docs/building.md#no-such-heading)"),
        ("README.md", "“first step at about", "“first step at nearly"),
        ("README.md", "the demo on a fresh machine (2026-11-27)", "the demo on a fresh machine"),
        ("README.md", "\n## Where to read on", "\n" * MAX_README_LINES + "## Where to read on"),
    ]
    for file, old, new in breakages:
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp)
            shutil.copy(root / "README.md", copy / "README.md")
            shutil.copytree(root / "docs", copy / "docs")
            for extra in ("topologies", "models"):
                (copy / extra).mkdir()
                shutil.copy(root / extra / "README.md", copy / extra / "README.md")
            text = (copy / file).read_text(encoding="utf-8")
            if old not in text:
                return [f"self-check: '{old}' is not in {file}: update the self-check"]
            (copy / file).write_text(text.replace(old, new, 1), encoding="utf-8")
            if not check(copy):
                return [f"self-check: a copy with '{old[:40]}' changed to '{new[:40]}' passed: "
                        "the check cannot fail"]
    print(f"self-check: {len(breakages)} damaged copies each failed, as they must")
    return []


def main(argv):
    root = Path(__file__).resolve().parent.parent
    args = [a for a in argv if a != "--self-check"]
    if args:
        root = Path(args[0]).resolve()
    problems = self_check(root) if "--self-check" in argv else []
    problems += check(root)
    for p in problems:
        print(p)
    n = len(pages(root))
    print(f"{n} pages: {'ok' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
