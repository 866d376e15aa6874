"""The ``DataLoader``: torch's with tuned defaults, its worker side, the loop's timing and positions."""
