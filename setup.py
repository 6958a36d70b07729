"""The one thing pyproject.toml cannot say: src/ is the package `engram`, and its sub-packages are found
rather than listed. Every directory of src/ counts, the data directories (schema/, templates/, ...)
included, as setuptools expects of directories whose files are installed."""

from setuptools import find_namespace_packages, setup

setup(packages=["engram", *(f"engram.{name}" for name in find_namespace_packages("src", exclude=["*__pycache__*"]))])
