"""skiplock: a durable, asyncio-native job queue and scheduler in your own database."""

from ._app import App
from ._batch import Batch
from ._config import DEFAULT_MAX_ATTEMPTS, Breaker, RetryPolicy, WorkerConfig
from ._job import (
    AuditEntry,
    BlockedKey,
    ChildProcess,
    CronRun,
    DeadGroup,
    JobContext,
    JobFilter,
    JobOutcome,
    JobRecord,
    JobState,
    KeyLoad,
    QueueInfo,
    SchemaVersion,
    StorageHold,
    StorageHolder,
    TaskPause,
    current_job,
)
from ._job_log import JobLog, LogLine
from ._lanes import Database, Split
from ._logging import JsonFormatter, configure_logging
from ._observe.plugins import MetricsExporter as _MetricsExporter
from ._observe.plugins import register_default_metrics_exporter as _register_metrics
from ._observe.stats import Stats, StatsGroup, WorkerInfo
from ._outcomes import Cancel, JobControl, Retry, Snooze
from ._task import JobHandle, Task
from ._worker.worker import Worker
from ._workflow import Chain, Chord, Group, Signature, Workflow, WorkflowHandle, chain, chord, group
from ._workflow_records import (
    BatchInfo,
    GraphNode,
    JobLinks,
    LinkedJob,
    ReceivedSignal,
    SignalOutcome,
    SignalReceipt,
    WaitingJob,
    WorkflowGraph,
)
from .errors import (
    ArgumentInvalid,
    BackendError,
    BackendUnavailable,
    BatchClosed,
    BlockingCallInLoop,
    ConfigurationError,
    DuplicateJob,
    JobCancelled,
    JobFailed,
    JobNotFound,
    LeaseLost,
    MailboxFull,
    ParentResultGone,
    PayloadError,
    PayloadTooLarge,
    QueueFull,
    SchemaError,
    SignalTimeout,
    SkiplockError,
    UnknownParent,
    UnknownTask,
    UrlRefused,
    WorkflowCycle,
)

__version__ = "0.1.0"


def _prometheus_exporter() -> _MetricsExporter:
    """The exporter a worker's ``metrics_port`` serves unless it was handed another: chosen
    here, at the edge, so nothing below it names an exporter; imported only when asked for."""
    from .prometheus import PrometheusExporter

    return PrometheusExporter()


_register_metrics(_prometheus_exporter)

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "App",
    "ArgumentInvalid",
    "AuditEntry",
    "BackendError",
    "BackendUnavailable",
    "Batch",
    "BatchClosed",
    "BatchInfo",
    "BlockedKey",
    "BlockingCallInLoop",
    "Breaker",
    "Cancel",
    "Chain",
    "ChildProcess",
    "Chord",
    "ConfigurationError",
    "CronRun",
    "Database",
    "DeadGroup",
    "DuplicateJob",
    "GraphNode",
    "Group",
    "JobCancelled",
    "JobContext",
    "JobControl",
    "JobFailed",
    "JobFilter",
    "JobHandle",
    "JobLinks",
    "JobLog",
    "JobNotFound",
    "JobOutcome",
    "JobRecord",
    "JobState",
    "JsonFormatter",
    "KeyLoad",
    "LeaseLost",
    "LinkedJob",
    "LogLine",
    "MailboxFull",
    "ParentResultGone",
    "PayloadError",
    "PayloadTooLarge",
    "QueueFull",
    "QueueInfo",
    "ReceivedSignal",
    "Retry",
    "RetryPolicy",
    "SchemaError",
    "SchemaVersion",
    "SignalOutcome",
    "SignalReceipt",
    "SignalTimeout",
    "Signature",
    "SkiplockError",
    "Snooze",
    "Split",
    "Stats",
    "StatsGroup",
    "StorageHold",
    "StorageHolder",
    "Task",
    "TaskPause",
    "UnknownParent",
    "UnknownTask",
    "UrlRefused",
    "WaitingJob",
    "Worker",
    "WorkerConfig",
    "WorkerInfo",
    "Workflow",
    "WorkflowCycle",
    "WorkflowGraph",
    "WorkflowHandle",
    "chain",
    "chord",
    "configure_logging",
    "current_job",
    "group",
]
