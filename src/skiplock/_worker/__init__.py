"""The worker: producer, executor, completer, notifier and maintenance in one TaskGroup."""
