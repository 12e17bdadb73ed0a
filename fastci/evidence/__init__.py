"""Evidence collection: which code units each test executed, with their calling context.

- ``stacks``: py-spy raw output -> the project's folded stack format (pure functions);
- ``pyspy``: starting and stopping ``py-spy record``;
- ``sampling`` / ``tracing``: the two ways a pytest session attributes stacks to tests;
- ``plugin``: the pytest feature (``--fastci-evidence``);
- ``collect`` / ``commands``: ``fastci collect``, evidence of one arbitrary command;
- ``publish``: building and publishing ``evidence`` events.
"""
