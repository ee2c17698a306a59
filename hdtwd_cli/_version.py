"""The package's version, importable from every layer (io included) without the package's API."""

__version__ = "0.1.0"
