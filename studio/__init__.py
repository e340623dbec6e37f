"""Avatar Studio headless core: avatar model, engine, presets, telemetry.

This package imports neither Qt nor vispy (checked by the import contract).
"""

__version__ = "0.1.0"
