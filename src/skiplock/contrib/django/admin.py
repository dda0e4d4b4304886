"""skiplock's jobs in the Django admin: read-only, filtered by state, queue and task, with
actions to requeue dead jobs and cancel pending ones (staff with ``skiplock.change_job``),
each recorded in the job's audit trail under the admin user's name. A job's arguments, result
and errors (its last traceback too) are shown only to staff with ``skiplock.view_job_payload``;
an action acts through the SkiplockBackend on the database the selected rows were read from.

A job's page is a view, never a form (a Save would write the row behind skiplock's back: the
change permission applies to the list's actions only); its last error's traceback is shown as
text. A database that has no skiplock table yet gets a page saying to migrate, not a 500."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import DatabaseError, connections, router
from django.template.response import TemplateResponse
from django.utils.html import format_html

from ..._job_log import job_log_of, log_lines
from .models import LIVE_STATES, REST_STATES, Job, PeriodicDefer, reads_in_parts

JOB_LOGS_READ = (
    "SELECT attempt, lines, cut_lines, cut_bytes FROM skiplock_job_logs WHERE job_id = %s "
    "ORDER BY attempt"
)
"""A job's own logs, through the connection's search_path as the job table is read."""

PAYLOAD = ("args", "kwargs", "result", "errors")
"""The fields ``skiplock.view_job_payload`` is needed to see."""


def _app(database: str) -> Any:
    """The app of the SkiplockBackend on ``database``: the rows an action was given came from
    there (the first backend configured may be on another database, holding other jobs under
    the same ids). Two backends on it with different schemas are refused: the admin reads one
    table through the connection's search_path and cannot tell which."""
    from django.tasks import task_backends

    from ..._backends.postgres.url import parse_postgres_url
    from .backend import SkiplockBackend

    places: dict[str, Any] = {}
    for backend in task_backends.all():
        if isinstance(backend, SkiplockBackend) and backend.database == database:
            url = backend.app.url
            schema = parse_postgres_url(url).schema if url.startswith("postgres") else ""
            places.setdefault(schema, backend.app)
    if len(places) != 1:
        found = "none" if not places else f"schemas {', '.join(sorted(places))}"
        raise LookupError(
            f"the jobs were read from database {database!r}: it needs exactly one "
            f"SkiplockBackend's schema there, found {found}"
        )
    return next(iter(places.values()))


def _missing_table(model_admin: Any, request: Any, what: str, title: str) -> Any:
    """A page saying to migrate when the model's table is not in its database, else None."""
    model = model_admin.model
    database = router.db_for_read(model)
    try:
        # views too: on SQLite from its migration 11, skiplock_jobs is a view of the job tables
        tables = connections[database].introspection.table_names(include_views=True)
    except DatabaseError:
        tables = []
    if model._meta.db_table in tables:
        return None
    flag = "" if database == "default" else f" --database={database}"
    model_admin.message_user(
        request,
        f"skiplock's {what} does not exist in database {database!r} yet: "
        f"run `manage.py migrate{flag}`.",
        messages.ERROR,
    )
    context = {**model_admin.admin_site.each_context(request), "title": title}
    return TemplateResponse(request, "admin/base_site.html", context)


class _Values:
    """A list filter's values (every distinct value of its field), read when the page renders
    and, on PostgreSQL, in two parts: the rest (history, dead and waiting jobs), then the live
    jobs (``JobQuerySet.count`` says why). Ordered by the database, as one read ordered them."""

    def __init__(self, queryset: Any, field: str) -> None:
        self.queryset, self.field = queryset, field
        self._values: list[Any] | None = None

    def _distinct(self, queryset: Any) -> Any:
        return queryset.distinct().order_by(self.field).values_list(self.field, flat=True)

    def _read(self) -> list[Any]:
        if not reads_in_parts(self.queryset):
            return list(self._distinct(self.queryset))
        found = {
            value
            for states in (REST_STATES, LIVE_STATES)
            for value in self._distinct(self.queryset.filter(state__in=states))
        }
        values = [v for v in found if v is not None]
        with connections[self.queryset.db].cursor() as cursor:  # the database's own order
            cursor.execute("SELECT v FROM unnest(%s::text[]) AS v ORDER BY v", [values])
            ordered = [r[0] for r in cursor.fetchall()]
        return ordered + ([None] if None in found else [])

    def __iter__(self) -> Any:
        if self._values is None:
            self._values = self._read()
        return iter(self._values)


class _ValuesFilter(admin.AllValuesFieldListFilter):  # type: ignore[misc]
    """Django's filter of a field's values, read as ``_Values`` reads them."""

    def __init__(
        self, field: Any, request: Any, params: Any, model: Any, model_admin: Any, field_path: str
    ) -> None:
        super().__init__(field, request, params, model, model_admin, field_path)
        self.lookup_choices: Any = _Values(model_admin.get_queryset(request), field.name)


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):  # type: ignore[misc]
    list_display = ("id", "task", "queue", "state", "priority", "attempt", "created_at")
    list_filter = ("state", ("queue", _ValuesFilter), ("task", _ValuesFilter))
    search_fields = ("task",)
    actions = ("requeue_dead", "cancel_pending")

    def get_readonly_fields(self, request: Any, obj: Any = None) -> list[str]:
        return self.get_fields(request, obj)

    def get_fields(self, request: Any, obj: Any = None) -> list[str]:
        shown = request.user.has_perm("skiplock.view_job_payload")
        fields = [f.name for f in Job._meta.fields if shown or f.name not in PAYLOAD]
        # a traceback and a job's own log quote arguments
        return [*fields, "last_traceback", "job_log"] if shown else fields

    def last_traceback(self, obj: Any) -> Any:
        """The last recorded error's traceback, as lines of text (not a JSON string)."""
        errors = obj.errors if isinstance(obj.errors, list) else []
        last = errors[-1] if errors and isinstance(errors[-1], dict) else {}
        text = last.get("traceback") or last.get("message") or ""
        return (
            format_html('<pre style="white-space: pre-wrap">{}</pre>', str(text)) if text else "-"
        )

    def job_log(self, obj: Any) -> Any:
        """The job's own log of each attempt (a task with ``job_log=True``), as text: each
        line's time, level, logger and message, and what was cut."""
        try:
            with connections[obj._state.db or "default"].cursor() as cursor:
                cursor.execute(JOB_LOGS_READ, [obj.id])
                rows = cursor.fetchall()
        except DatabaseError:  # a database not migrated to skiplock's migration 30 yet
            return "-"
        if not rows:
            return "-"
        text = "\n".join(
            line for attempt, *row in rows for line in log_lines(job_log_of(obj.id, attempt, *row))
        )
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', text)

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        if obj is not None:
            return False  # the page of one job is read-only: see the module doc
        return bool(super().has_change_permission(request, obj))

    def _unmigrated(self, request: Any) -> Any:
        """The page saying to migrate when the job table does not exist (else None)."""
        return _missing_table(self, request, "job table", "skiplock jobs")

    def changelist_view(self, request: Any, extra_context: Any = None) -> Any:
        return self._unmigrated(request) or super().changelist_view(request, extra_context)

    def change_view(
        self, request: Any, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> Any:
        # a job's page is reached without the list too (a bookmark, a link in a log)
        return self._unmigrated(request) or super().change_view(
            request, object_id, form_url, extra_context
        )

    def history_view(self, request: Any, object_id: str, extra_context: Any = None) -> Any:
        return self._unmigrated(request) or super().history_view(request, object_id, extra_context)

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def requeue_dead(self, request: Any, queryset: Any) -> None:
        app = self._app(request, queryset)
        if app is not None:
            who = request.user.get_username()
            ids = list(queryset.filter(state="dead").values_list("id", flat=True))
            done = [i for i in ids if app.run_sync(app.retry_job(i, who=who))]
            self.message_user(request, f"Requeued {len(done)} dead job(s).", messages.SUCCESS)

    def cancel_pending(self, request: Any, queryset: Any) -> None:
        app = self._app(request, queryset)
        if app is not None:
            who = request.user.get_username()
            ids = list(queryset.filter(state="pending").values_list("id", flat=True))
            for job_id in ids:
                app.run_sync(app.cancel_job(job_id, who=who))
            self.message_user(request, f"Cancelled {len(ids)} pending job(s).", messages.SUCCESS)

    def _app(self, request: Any, queryset: Any) -> Any:
        """The app of the rows' database, or None with the reason told to the user."""
        try:
            return _app(queryset.db)
        except LookupError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return None


@admin.register(PeriodicDefer)
class PeriodicDeferAdmin(admin.ModelAdmin):  # type: ignore[misc]
    """skiplock's slot ledger, as django-tasks-concurrent's PeriodicDefer admin listed it, and
    only listed: no add, change or delete (a deleted row would let its slot fire again while
    it is inside the max delay), no page per row (the ledger has no single-column key)."""

    list_display = ("task_name", "periodic_id", "defer_at", "created", "job_id", "skipped")
    list_display_links = None
    list_filter = ("schedule",)
    search_fields = ("schedule",)

    def changelist_view(self, request: Any, extra_context: Any = None) -> Any:
        missing = _missing_table(self, request, "slot table", "skiplock periodic slots")
        return missing or super().changelist_view(request, extra_context)

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def change_view(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        raise PermissionDenied("the periodic slot ledger is read-only")

    def delete_view(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        raise PermissionDenied("the periodic slot ledger is read-only")

    def history_view(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        raise PermissionDenied("the periodic slot ledger has no per-row pages")


# The job pages only read (an action acts through skiplock's own operations, on sessions of
# its own): they run outside ATOMIC_REQUESTS on every database, so each statement ends as it
# is read and no page holds the live jobs across the rest of its view.
_views: tuple[Any, ...] = (JobAdmin.changelist_view, JobAdmin.change_view, JobAdmin.history_view)
for _view in _views:
    _view._non_atomic_requests = set(connections)

# What @admin.action sets, without its untyped decorator (mypy --strict runs without Django).
for _action, _label in (
    (JobAdmin.requeue_dead, "Requeue selected dead jobs"),
    (JobAdmin.cancel_pending, "Cancel selected pending jobs"),
):
    _action.short_description = _label  # type: ignore[attr-defined]
    _action.allowed_permissions = ("change",)  # type: ignore[attr-defined]
JobAdmin.last_traceback.short_description = "Last traceback"  # type: ignore[attr-defined]
JobAdmin.job_log.short_description = "Job log"  # type: ignore[attr-defined]
