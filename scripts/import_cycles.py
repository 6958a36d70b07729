"""Import cycles among Engram's modules, function-level and type-checking imports included.

    .venv/bin/python scripts/import_cycles.py        # prints each cycle's modules; exit 1 when there is one

`make lint` runs it. It reads the import graph grimp builds (the library import-linter uses) and
prints every strongly connected group of more than one module.
"""

from __future__ import annotations

import sys

import grimp


def cycles(package: str = "engram") -> list[list[str]]:
    graph = grimp.build_graph(package, include_external_packages=False, cache_dir=None)
    ours = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:  # Tarjan's algorithm, without recursion
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, edges = work[-1]
            for other in edges:
                if other not in ours:
                    continue
                if other not in index:
                    index[other] = low[other] = len(index)
                    stack.append(other)
                    on_stack.add(other)
                    work.append((other, iter(sorted(graph.find_modules_directly_imported_by(other)))))
                    break
                if other in on_stack:
                    low[module] = min(low[module], index[other])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == module:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))

    for module in ours:
        if module not in index:
            visit(module)
    return found


def main() -> int:
    found = cycles()
    for group in found:
        print(f"a cycle of {len(group)} modules: {', '.join(group)}")
    print(f"{len(found)} import cycle(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
