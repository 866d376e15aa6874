"""What every stream of a pass shares, whatever it reads: the partition of a pass over ranks and
workers (pure), the grid a process sits on, the job's data position and its elastic resume, the
one counter shape of a stream (``StreamCounters``), how far the loop has got, and renewed options."""
