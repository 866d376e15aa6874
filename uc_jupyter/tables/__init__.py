"""Catalog tables: Delta snapshots read directly (``delta``), through Spark Connect, and exported."""
