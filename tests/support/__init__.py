"""Helpers the tests and the benchmarks share: fixtures' building blocks, fakes and servers they start."""
