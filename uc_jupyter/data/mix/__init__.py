"""Several datasets read as one by weight: the schedule (pure), each mix epoch's plan (pure), and
``Mix``, the dataset, partitioned and resumed by the machinery of :mod:`uc_jupyter.data.stream`."""
