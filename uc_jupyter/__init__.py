"""uc_jupyter: load training data through a Unity Catalog from any Jupyter notebook."""

__version__ = "0.1.0"
