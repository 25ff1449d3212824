"""Shared helpers for the Cosmos 3 Generator cookbook.

Importing this package has no side effects: nothing is loaded, downloaded or read from the environment
until a function is called. Heavy dependencies (torch, diffusers) are imported inside the modules that need them.
"""

__version__ = "0.1.0"
