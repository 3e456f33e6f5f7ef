#!/usr/bin/env python3
"""Rewrite schema-v1 finding ids to their current names in the given files (or the files under given folders).

    python3 tools/rename_finding_ids.py dflash_doctor tests README.md docs

Each old id of `dflash_doctor/codes/aliases.py` becomes the first of its new ids, only where it stands as a
whole id: not inside a longer id (`import-surface.ok` holds `surface.ok`, `dist.record-broken` starts with
`dist.record`) nor after a dot or a word. A current id is never an old one, so running it twice changes
nothing the second time. An old id that now has one name per check (`import.timeout` is `imports.timeout` or
`extensions.timeout`) becomes the first; look at what the script changed where the other check is meant.

It leaves alone files that say `rename-finding-ids: skip` (the alias table, tests of the mapping) and
everything under a fixtures/ folder (recorded v1 documents stay as recorded). `--check` lists the files it
would change and exits 1 if there are any.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_MARK = "rename-finding-ids: " + "skip"  # the docstring above says it: this file, whose examples are old ids, is skipped too
SUFFIXES = {".py", ".md", ".json", ".toml", ".txt", ".sh", ".cfg", ".ini", ".yaml", ".yml", ".rst"}


def old_to_new() -> dict[str, str]:
    sys.path.insert(0, str(ROOT))
    from dflash_doctor.codes.aliases import V1_ALIASES

    return {old: new[0] for old, new in V1_ALIASES.items()}


def pattern(mapping: Mapping[str, str]) -> re.Pattern[str]:
    # Longest first, so that no id wins over a longer one it begins; the lookarounds keep it a whole id.
    alternatives = "|".join(re.escape(old) for old in sorted(mapping, key=len, reverse=True))
    return re.compile(rf"(?<![\w.-])(?:{alternatives})(?![\w-])")


def rename(text: str, mapping: Mapping[str, str], compiled: re.Pattern[str] | None = None) -> str:
    compiled = compiled or pattern(mapping)
    return compiled.sub(lambda match: mapping[match.group(0)], text)


def files(paths: list[str]) -> Iterator[Path]:
    for given in paths:
        path = Path(given)
        candidates = sorted(path.rglob("*")) if path.is_dir() else [path]
        for candidate in candidates:
            parts = candidate.resolve().parts
            if "fixtures" in parts:
                continue  # recorded documents (v1 reports, engine runs) stay as recorded
            wanted = candidate.suffix in SUFFIXES or not path.is_dir()
            if (wanted and candidate.is_file() and not candidate.is_symlink()
                    and "__pycache__" not in parts and ".git" not in parts):
                yield candidate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Rename schema-v1 finding ids to their current names.")
    parser.add_argument("paths", nargs="+", help="files, or folders to walk")
    parser.add_argument("--check", action="store_true", help="change nothing; list what would change, exit 1 if any")
    args = parser.parse_args(argv)
    mapping = old_to_new()
    compiled = pattern(mapping)
    changed = []
    for path in files(args.paths):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if SKIP_MARK in text:
            continue
        new = rename(text, mapping, compiled)
        if new != text:
            changed.append(path)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for path in changed:
        sys.stdout.write(f"{'would rename ids in' if args.check else 'renamed ids in'} {path}\n")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
