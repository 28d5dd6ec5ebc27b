#!/usr/bin/env python3
"""Checks the include graph against docs/ARCHITECTURE.md.

The "Dependencies" table of docs/ARCHITECTURE.md lists, per folder, the folders it may use
directly; everything reachable from those is allowed too (a layer may use any layer below it).
Every `#include "folder/…"` in src/ and bench/ must follow an allowed edge, and `<mpi.h>` may
be included only where the table's "mpi.h" column says yes. Exit 1 with one line per
violation; the test that runs this is `architecture_layers` (tests/CMakeLists.txt).
"""
import pathlib
import re
import sys

from check_architecture import reachable, read_table, table_rows

root = pathlib.Path(__file__).resolve().parent.parent
doc = root / "docs" / "ARCHITECTURE.md"
edges = read_table(doc)
mpi_ok = {cells[0].strip("`") for cells in table_rows(doc)
          if len(cells) > 2 and cells[2].lower().startswith("yes")}


def folder_of(path):
    rel = path.relative_to(root).parts
    return rel[1] if rel[0] == "src" else rel[0]


errors = []
for path in sorted(list((root / "src").rglob("*.[ch]pp")) + list((root / "src").rglob("*.cu")) + list((root / "bench").rglob("*.[ch]pp"))):
    here = folder_of(path)
    if here not in edges:
        errors.append(f"{path.relative_to(root)}: folder '{here}' is not in the Dependencies table")
        continue
    allowed = reachable(edges, here) | {here}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = re.match(r'\s*#\s*include\s*"([a-z_]+)/', line)
        if m and m.group(1) in edges and m.group(1) not in allowed:
            errors.append(f"{path.relative_to(root)}:{n}: {here} may not include {m.group(1)}/ "
                          f"(allowed: {', '.join(sorted(allowed))})")
        if re.match(r"\s*#\s*include\s*<mpi\.h>", line) and here not in mpi_ok:
            errors.append(f"{path.relative_to(root)}:{n}: only {', '.join(sorted(mpi_ok))} may include <mpi.h>")

for e in errors:
    print(e)
print(f"checked {len(edges)} folders: {'OK' if not errors else f'{len(errors)} violations'}")
sys.exit(1 if errors else 0)
