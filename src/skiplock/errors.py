"""Every error skiplock raises on purpose, in one tree.

Catch ``SkiplockError`` to catch them all; driver errors that escape a backend are wrapped
with the original kept as ``__cause__``::

    SkiplockError
     ├── ConfigurationError        a bad URL, option or task declaration
     │    ├── UrlRefused            the driver refused an option of the URL at connect
     │    ├── UnknownParent         depends_on names no job (never written, or pruned)
     │    ├── WorkflowCycle         the edges an enqueue would add close a cycle
     │    └── BatchClosed           a job joined a batch that is closed
     ├── PayloadError              args that cannot become a job row
     │    └── PayloadTooLarge       over the app's ``max_payload_bytes``
     ├── UnknownTask               a task name nobody registered
     ├── JobNotFound               no job with that id
     ├── QueueFull                 a bounded queue is at its max_depth: "not now"
     ├── DuplicateJob              a live job already holds that unique_key (on_duplicate="raise")
     ├── SchemaError               the database schema is missing or outdated
     ├── JobFailed                 an awaited job ended dead (carries its last error)
     ├── JobCancelled              an awaited job was cancelled
     ├── BlockingCallInLoop        a blocking call (``result_sync``) on a running event loop
     ├── SignalTimeout             ``job.wait_for`` ended by its timeout, no signal came
     ├── MailboxFull               a job keeps ``max_signals_kept`` signals no wait took yet
     ├── ParentResultGone          a retry of a job that never got a result it needs, now gone
     ├── LeaseLost                 a running job's lease passed to another worker mid-step
     └── BackendError              the database failed; ``__cause__`` holds the driver error
          └── BackendUnavailable   the database could not be reached

Waiting for a result past its ``timeout`` raises the built-in ``TimeoutError`` (the job goes
on). Non-JSON arguments raise the built-in ``TypeError`` (with the argument named), because that
is what every Python programmer already expects from ``json.dumps``.
"""

from __future__ import annotations


class SkiplockError(Exception):
    """Base class of every error skiplock raises on purpose."""

    default_message = "skiplock error"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.default_message)


class ConfigurationError(SkiplockError, ValueError):
    """A URL, option or task declaration is invalid; the message names the field."""

    default_message = "invalid configuration"


class UrlRefused(ConfigurationError):
    """The driver refused an option of the database URL (``?sslmode=bogus``) when connecting:
    a person must fix the URL, so nobody retries it as an outage (exit 2 in the CLI)."""

    default_message = "the database URL has an option the driver refuses"


class PayloadError(SkiplockError, ValueError):
    """A job's arguments cannot be stored as strict JSON."""

    default_message = "job arguments cannot be stored"


class PayloadTooLarge(PayloadError):
    """The encoded arguments are larger than the configured limit."""

    default_message = "job arguments are too large"


class ArgumentInvalid(PayloadError):
    """An argument annotated with a pydantic model or a dataclass does not validate: the
    message names the task, the argument and the field (at enqueue, nothing is written; at
    run, the job goes to dead with it)."""

    default_message = "a typed argument does not validate"


class UnknownParent(ConfigurationError):
    """A ``depends_on`` names no job: never written, or pruned or discarded since."""

    default_message = "depends_on names no job"


class WorkflowCycle(ConfigurationError):
    """The edges an enqueue would add close a cycle (a job waiting, through others, on
    itself)."""

    default_message = "the dependencies form a cycle"


class BatchClosed(ConfigurationError):
    """A job was added to a batch that is already closed."""

    default_message = "the batch is closed"


class SignalTimeout(SkiplockError):
    """``job.wait_for(name, timeout=...)`` ran out: no signal of that name came in time.
    The job runs on (catch it to take another path); ``name`` is the signal's."""

    default_message = "no signal came before the wait's timeout"

    def __init__(self, message: str | None = None, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


class ParentResultGone(SkiplockError):
    """A job that ended while it waited for its parents (cancelled, say) cannot be retried:
    a parent whose result it needs ended without one (dead, cancelled) or is gone (pruned).
    Retry that parent first (the job then waits for it), or enqueue the work again."""

    default_message = "a parent's result this job needs is gone"


class LeaseLost(SkiplockError):
    """The running job's lease passed to another worker (this one was too slow to heartbeat,
    or was cut off): what it would store now is not stored; the holder runs it."""

    default_message = "the job's lease was lost"


class UnknownTask(SkiplockError, LookupError):
    """No task is registered under that name."""

    default_message = "unknown task"


class JobNotFound(SkiplockError, LookupError):
    """No job has that id."""

    default_message = "job not found"


class MailboxFull(SkiplockError):
    """``app.signal`` to a job that keeps ``App(max_signals_kept=...)`` signals no
    ``wait_for`` took yet (of any name): this one was not kept, nothing was written. Send
    it again once the job took some; ``job_id`` and ``most`` say which job and bound."""

    default_message = "the job keeps as many signals as it may"

    def __init__(
        self, message: str | None = None, job_id: int | None = None, most: int | None = None
    ) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.most = most


class QueueFull(SkiplockError):
    """Enqueueing would pass a bounded queue's ``max_depth``; nothing was written."""

    default_message = "the queue is full"


class DuplicateJob(SkiplockError):
    """A live job already holds this ``unique_key``; ``job_id`` is that job."""

    default_message = "a live job already has this unique key"

    def __init__(self, message: str | None = None, job_id: int | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id


class SchemaError(SkiplockError):
    """The database schema is missing or older than this skiplock."""

    default_message = "the skiplock schema is missing or outdated: run `skiplock migrate`"


class JobFailed(SkiplockError):
    """An awaited job ended ``dead``: attempts spent, a permanent error, or an unstorable
    result. Carries the last recorded error (the handler's exception as text: its type name,
    message and traceback), since the exception itself lived in another process."""

    default_message = "the job failed"

    def __init__(
        self,
        message: str | None = None,
        *,
        job_id: int | None = None,
        error_type: str = "",
        error_message: str = "",
        traceback: str = "",
    ) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.error_type = error_type
        self.error_message = error_message
        self.traceback = traceback


class JobCancelled(SkiplockError):
    """An awaited job was cancelled (by a person, or by its task raising ``Cancel``)."""

    default_message = "the job was cancelled"

    def __init__(self, message: str | None = None, *, job_id: int | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id


class BlockingCallInLoop(SkiplockError, RuntimeError):
    """A blocking call was made from a running event loop: it would stall that loop (and any
    worker on it that must finish the job waited for). The message names the async call."""

    default_message = "a blocking call inside a running event loop"


class BackendError(SkiplockError):
    """The database failed an operation; the driver's error is the ``__cause__``."""

    default_message = "database operation failed"


class BackendUnavailable(BackendError):
    """The database could not be reached."""

    default_message = "database unavailable"
