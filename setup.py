"""The one thing pyproject.toml cannot say: src/ is the package `engram`, and its sub-packages are found
rather than listed (every directory of src/ with an __init__.py)."""

from setuptools import find_packages, setup

setup(packages=["engram", *(f"engram.{name}" for name in find_packages("src"))])
