"""The soak and fault suite (``make soak``): a long training run under faults, and what held.

Two ranks train for 20 epochs over a remote volume and a table on the S3 test server, which answers
1% of GETs with 503 and resets 0.1% of connections mid-answer, with the ranks' dashboard live, while
a DataLoader worker, a rank and the ``uc-jupyter serve`` process are killed (SIGKILL; the server is
started again) and the cache's disk is filled once. Afterwards it checks that every epoch held every
sample exactly once (a failed call resumed from the newest checkpoint), that no sample was corrupted,
that nothing was left behind (files, processes), and that memory stayed flat; it prints a table and
exits non-zero when anything did not hold. Modules: plan (sizes, which epoch each fault hits), stack
(the services), rank_loop (each rank's epoch), injections (the driver's faults), leftovers, verdict
(the checks, pure), driver (the loop), __main__ (the command).

Example:
    python -m uc_jupyter.testing.soak                 # the full run: 38 minutes on a busy 2-core machine
    python -m uc_jupyter.testing.soak --size quick    # every fault on less data, a minute or two
"""
