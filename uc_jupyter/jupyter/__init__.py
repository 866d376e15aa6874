"""The IPython side: magics (adapters only), their argument parsing, and tab completion."""
