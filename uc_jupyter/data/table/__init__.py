"""Table rows into PyTorch: ``UCTableDataset`` over the one Delta snapshot opener."""
