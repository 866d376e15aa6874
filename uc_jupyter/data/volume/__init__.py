"""Volume files into PyTorch: the listing (in pages as it arrives), the fetch-ahead window over the
shared cache, the files handed out until the loop is past them, decoding, and ``UCVolumeDataset``."""
