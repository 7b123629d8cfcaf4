"""tailscope: where does a microservice's tail latency come from?

The Python side drives the native engines, stores their result documents in
DuckDB, draws the figures and writes the HTML report. See docs/formats.md for
the engine/driver contract.
"""

__version__ = "0.1.0"
