"""Evidence collection: which code units each test executed, with their calling context.

- ``pytest_evidence``: the pytest feature (``--fastci-evidence``), its import window and its publishing;
- ``first_calls``: the default collector, each unit at its first calls in a test (``sys.monitoring``
  on 3.12+, ``sys.setprofile`` on 3.11);
- ``tracing``: the per-call tracer (the import window) and the gate that confines it to project code;
- ``sampling`` / ``pyspy``: py-spy's samples, attributed to tests by marker frames;
- ``stacks`` / ``sources``: folded stacks and the units of source files, parsed once and kept by content;
- ``imports`` / ``reads`` / ``dimensions``: import closures and distributions, files read, workload points;
- ``collect``: ``fastci collect``, evidence of one arbitrary command;
- ``publish``: building and publishing ``evidence`` events.
"""
