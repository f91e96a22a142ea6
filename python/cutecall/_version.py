"""The version of cutecall (one place; pyproject.toml carries the same)."""

__version__ = "0.1.0"
