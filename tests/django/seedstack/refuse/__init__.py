"""A project's ``task_enqueued`` receiver that refuses every enqueue of one task (its
``SEEDSTACK_REFUSE``, a task path): the seed-stack test's schedule that always fails. Installed
only when a test sets that variable."""
