#!/usr/bin/env python3
"""Checks docs/ARCHITECTURE.md's Dependencies table against the CMake targets.

Each folder (src/<folder>/, and bench/) defines meshtp targets (add_library /
add_executable / pybind11_add_module of a name starting with `meshtp`); target_link_libraries gives their links to
other folders' meshtp_* targets. The table lists, per folder, the folders it may use; what
those may use is allowed too. The two must describe one graph:

  - every edge the table lists must be a link CMake has, directly or through the links of
    the folders it links (a PUBLIC link's dependencies reach the linking target too);
  - every link CMake has must be allowed by the table: listed, or reachable through listed
    edges (CMake also names the layers below, e.g. meshtp_model links meshtp_core);
  - the table has a row for every folder with a meshtp target, and no other row.

Prints one line per disagreement, naming the edge and where it is, and exits 1; exits 0 with
a summary when they agree. `--doc PATH` reads another copy of the doc (the negative test
feeds it a doctored one); the CMake files are always this tree's. Run by the test
`architecture_doc_matches_cmake` (tests/CMakeLists.txt). scripts/check_layers.py checks the
includes against the same table, read with table_rows / read_table / reachable from here.
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def strip_comments(text):
    """CMake text without `#` comments (a `#` inside a quoted argument is kept)."""
    out = []
    for line in text.splitlines():
        quoted, cut = False, len(line)
        for i, c in enumerate(line):
            if c == '"' and (i == 0 or line[i - 1] != "\\"):
                quoted = not quoted
            elif c == "#" and not quoted:
                cut = i
                break
        out.append(line[:cut])
    return "\n".join(out)


def commands(text, names):
    """(name, [arguments], line) of every call of a command in `names`."""
    pattern = re.compile(r"\b(" + "|".join(names) + r")\s*\(", re.IGNORECASE)
    for m in pattern.finditer(text):
        depth, i, quoted = 1, m.end(), False
        while i < len(text) and depth:
            c = text[i]
            if c == '"':
                quoted = not quoted
            elif not quoted and c == "(":
                depth += 1
            elif not quoted and c == ")":
                depth -= 1
            i += 1
        args = text[m.end():i - 1].split()
        yield m.group(1).lower(), args, text.count("\n", 0, m.start()) + 1


def cmake_files(folder_dir):
    """A folder's CMakeLists.txt and the files it include()s from its own directory."""
    main = folder_dir / "CMakeLists.txt"
    files = [main]
    text = strip_comments(main.read_text())
    for _, args, _ in commands(text, ["include"]):
        if args:
            name = args[0].replace("${CMAKE_CURRENT_SOURCE_DIR}/", "")
            path = folder_dir / name
            if "$" not in name and path.is_file():
                files.append(path)
    return files


def read_cmake():
    """(targets: target → folder, links: [(folder, target, linked, file, line)])."""
    folders = sorted(p.parent for p in (ROOT / "src").glob("*/CMakeLists.txt"))
    folders.append(ROOT / "bench")
    # Targets the top-level CMakeLists.txt defines (meshtp_warnings) are not layers.
    top = strip_comments((ROOT / "CMakeLists.txt").read_text())
    not_layers = {args[0] for _, args, _ in commands(top, ["add_library", "add_executable"])
                  if args}
    targets, calls = {}, []
    for folder_dir in folders:
        folder = folder_dir.name
        for path in cmake_files(folder_dir):
            text = strip_comments(path.read_text())
            for cmd, args, line in commands(
                    text, ["add_library", "add_executable", "pybind11_add_module",
                           "target_link_libraries"]):
                if not args:
                    continue
                if cmd == "target_link_libraries":
                    calls.append((folder, args[0], args[1:], path, line))
                elif args[0].startswith("meshtp"):
                    targets[args[0]] = folder
    links = []
    for folder, target, items, path, line in calls:
        if target not in targets:
            continue
        for item in items:
            if re.fullmatch(r"meshtp_\w+", item) and item not in not_layers:
                links.append((targets[target], target, item, path, line))
    return targets, links


def table_rows(doc_path):
    """The cells of every folder row of the doc's '## Dependencies' table (scripts/check_layers.py
    reads the same rows)."""
    text = doc_path.read_text()
    section = text.split("\n## Dependencies", 1)
    if len(section) != 2:
        sys.exit(f"error: {doc_path} has no '## Dependencies' section")
    body = re.split(r"\n## ", section[1], maxsplit=1)[0]
    rows = []
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and re.fullmatch(r"`[a-z_]+`", cells[0]):
            rows.append(cells)
    if not rows:
        sys.exit(f"error: {doc_path}: no rows in the Dependencies table")
    return rows


def read_table(doc_path):
    """folder → set of folders its row lists."""
    return {cells[0].strip("`"): set(re.findall(r"`([a-z_]+)`", cells[1]))
            for cells in table_rows(doc_path)}


def reachable(graph, start):
    seen, todo = set(), list(graph.get(start, ()))
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.add(f)
            todo.extend(graph.get(f, ()))
    return seen


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--doc", type=pathlib.Path, default=ROOT / "docs" / "ARCHITECTURE.md",
                        help="the architecture doc to check (default: docs/ARCHITECTURE.md)")
    doc_path = parser.parse_args().doc
    if not doc_path.is_file():
        sys.exit(f"error: cannot read '{doc_path}'")
    table = read_table(doc_path)
    targets, links = read_cmake()

    def rel(path):
        path = path.resolve()
        return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path

    doc = rel(doc_path)

    errors = []
    folders = set(targets.values())
    for f in sorted(folders - table.keys()):
        names = ", ".join(sorted(t for t, g in targets.items() if g == f))
        errors.append(f"folder '{f}' ({names}) has no row in {doc}'s Dependencies table")
    for f in sorted(table.keys() - folders):
        errors.append(f"{doc} has a row for '{f}', but no CMake file defines a meshtp target "
                      f"in src/{f}/ or bench/")

    cmake = {}
    first_link = {}
    for folder, target, linked, path, line in links:
        if linked not in targets:
            errors.append(f"{rel(path)}:{line}: {target} links {linked}, which no folder "
                          "defines")
            continue
        to = targets[linked]
        if to != folder:
            cmake.setdefault(folder, set()).add(to)
            first_link.setdefault((folder, to), (target, linked, path, line))

    for folder in sorted(table):
        for to in sorted(table[folder]):
            if to not in reachable(cmake, folder):
                where = next((rel(p) for g, _, _, p, _ in links if g == folder),
                             f"src/{folder}/CMakeLists.txt")
                errors.append(f"edge {folder} -> {to} is in {doc} but not in CMake: no meshtp "
                              f"target of '{folder}' links one of '{to}', directly or through "
                              f"another meshtp library ({where})")
    for (folder, to), (target, linked, path, line) in sorted(first_link.items()):
        if to not in reachable(table, folder):
            errors.append(f"edge {folder} -> {to} is in CMake but not in {doc}: "
                          f"{rel(path)}:{line}: {target} links {linked}, and the table "
                          f"does not let '{folder}' use '{to}' (add it to the row, or drop the "
                          "link)")

    for e in errors:
        print(f"error: {e}")
    n_links = sum(len(v) for v in cmake.values())
    if errors:
        print(f"{doc} and the CMake links disagree: {len(errors)} difference(s)")
        return 1
    print(f"architecture: {doc}'s Dependencies table matches the CMake links "
          f"({len(folders)} folders, {n_links} folder links)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
