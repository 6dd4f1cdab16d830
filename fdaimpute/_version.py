"""The package's version, in a module of its own so that any layer can read it
without importing the whole package."""

__version__ = "0.1.0.dev0"
