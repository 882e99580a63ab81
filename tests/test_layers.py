"""The layers of the source tree (docs/architecture.md, "Layers"): every
#include "..." of lib/, common/, daemon/ and client/ points down or into
its own folder, never up and never sideways between front doors, and the
core's private headers stay inside daemon/core.

The build enforces the same rule (each folder is a library that sees only
the folders below it); this test names the file and the line when a
change breaks it, and also covers the headers a build would find by
accident (a name that exists in two folders).
"""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# folder: the folders its files may include from, besides its own.
# "lib/sotto.h" alone: the public header, the one part of libsotto the
# programs see.
PUBLIC = "lib/sotto.h"
DAEMON_BELOW_DOORS = ["daemon/net", "daemon/core", "daemon/sources",
                      "daemon/base", "common", PUBLIC]
ALLOWED = {
    "common": [PUBLIC],
    "client": ["common", PUBLIC],
    "daemon/base": [],
    "daemon/sources": ["daemon/base", "common", PUBLIC],
    "daemon/core": ["daemon/sources", "daemon/base", "common", PUBLIC],
    "daemon/net": ["daemon/core", "daemon/sources", "daemon/base", "common",
                   PUBLIC],
    "daemon/unix": DAEMON_BELOW_DOORS,
    "daemon/http": DAEMON_BELOW_DOORS,
    "daemon/ws": DAEMON_BELOW_DOORS,
    "daemon/wyoming": DAEMON_BELOW_DOORS,
    "daemon/realtime": DAEMON_BELOW_DOORS,
    "daemon/deepgram": DAEMON_BELOW_DOORS,
    # the program: the one file that names every door
    "daemon": ["daemon/unix", "daemon/http", "daemon/ws", "daemon/wyoming",
               "daemon/realtime", "daemon/deepgram"]
    + DAEMON_BELOW_DOORS,
}
# lib/'s own layers: each folder sees the ones listed (and sotto.h).
LIB_ALLOWED = {
    "lib": [],
    "lib/kernels": [],
    "lib/model": ["lib/kernels"],
    "lib/vad": ["lib/model", "lib/kernels"],
    "lib/speaker": ["lib/model", "lib/kernels"],
    "lib/decode": ["lib/speaker", "lib/vad", "lib/model", "lib/kernels"],
    "lib/stream": ["lib/decode", "lib/speaker", "lib/vad", "lib/model",
                   "lib/kernels"],
}
for folder, below in LIB_ALLOWED.items():
    ALLOWED[folder] = below + [PUBLIC]

# Headers only their own folder may include.
PRIVATE = re.compile(r"-private\.h$")
# Headers of daemon/core that doors must not include: the program's.
PROGRAM_ONLY = {"daemon/core/daemon.h": ["daemon", "daemon/core"]}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def headers() -> dict[str, list[str]]:
    """Every header of the layered folders: its name -> its paths."""
    found: dict[str, list[str]] = {}
    for top in ("lib", "common", "client", "daemon"):
        for h in (REPO / top).rglob("*.h"):
            rel = h.relative_to(REPO).as_posix()
            found.setdefault(h.name, []).append(rel)
    return found


def folder_of(rel: str) -> str:
    return rel.rsplit("/", 1)[0]


def violations() -> list[str]:
    all_headers = headers()
    bad = []
    for top in ("lib", "common", "client", "daemon"):
        for src in sorted((REPO / top).rglob("*.[ch]")):
            rel = src.relative_to(REPO).as_posix()
            here = folder_of(rel)
            if here not in ALLOWED:
                bad.append(f"{rel}: folder {here} has no place in the "
                           "layers (tests/test_layers.py, docs/architecture.md)")
                continue
            text = src.read_text(errors="replace")
            for m in INCLUDE.finditer(text):
                name = m.group(1)
                line = text.count("\n", 0, m.start()) + 1
                where = all_headers.get(Path(name).name, [])
                if f"{here}/{name}" in where:
                    target = f"{here}/{name}"
                else:
                    ok = [w for w in where
                          if folder_of(w) in ALLOWED[here] or w in ALLOWED[here]]
                    if ok:
                        target = ok[0]
                    elif where:
                        bad.append(f"{rel}:{line}: includes {where[0]}, which "
                                   f"{here}/ may not see (it sees "
                                   f"{', '.join(ALLOWED[here]) or 'only itself'})")
                        continue
                    else:
                        continue  # a system or generated header
                if PRIVATE.search(target) and folder_of(target) != here:
                    bad.append(f"{rel}:{line}: includes {target}, private "
                               f"to {folder_of(target)}/")
                if target in PROGRAM_ONLY and here not in PROGRAM_ONLY[target]:
                    bad.append(f"{rel}:{line}: includes {target}, which only "
                               f"{' and '.join(PROGRAM_ONLY[target])} may")
    return bad


def test_includes_point_down():
    bad = violations()
    assert not bad, "includes against the layers:\n" + "\n".join(bad)


def test_every_folder_has_a_place():
    """A new folder under lib/ or daemon/ must be given its layer here
    (and in docs/architecture.md) before it builds."""
    folders = {folder_of(p.relative_to(REPO).as_posix())
               for top in ("lib", "common", "client", "daemon")
               for p in (REPO / top).rglob("*.[ch]")}
    assert folders <= set(ALLOWED), sorted(folders - set(ALLOWED))


def test_the_checker_sees_a_bad_include(tmp_path, monkeypatch):
    """The checker itself: a door that includes another door's header,
    and core including a door's, are both reported."""
    for d in ("daemon/core", "daemon/ws", "daemon/wyoming", "lib", "common",
              "client"):
        (tmp_path / d).mkdir(parents=True, exist_ok=True)
    (tmp_path / "lib/sotto.h").write_text("")
    (tmp_path / "daemon/core/core.h").write_text("")
    (tmp_path / "daemon/ws/ws.h").write_text("")
    (tmp_path / "daemon/wyoming/wyoming.h").write_text('#include "ws.h"\n')
    (tmp_path / "daemon/core/session.c").write_text(
        '#include "core.h"\n#include "wyoming.h"\n')
    monkeypatch.setattr(__import__(__name__), "REPO", tmp_path)
    bad = violations()
    assert any("daemon/wyoming/wyoming.h:1: includes daemon/ws/ws.h" in b
               for b in bad), bad
    assert any("daemon/core/session.c:2: includes daemon/wyoming/wyoming.h"
               in b for b in bad), bad
    assert len(bad) == 2, bad
