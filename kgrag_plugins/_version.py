"""The package version, in a leaf module (the index manifest records it without importing the package root)."""

__version__ = "0.1.0"
