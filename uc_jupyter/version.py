"""The package's version, in a module of its own: code in every layer records it (checkpoint markers,
the Ray version check), and importing the package's face for it would import the notebook layer."""

__version__ = "0.1.0"
