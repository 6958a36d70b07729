"""The benchmarks as a package: run from the repository root as `python -m bench.NAME`, so they import
each other and `tests.support` without editing the import path."""
