"""The suite as a package, so its helpers import as `tests.support` from the tests and from bench/."""
