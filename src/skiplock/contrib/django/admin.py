"""skiplock's jobs in the Django admin: read-only, filtered by state, queue and task, with
actions to requeue dead jobs and cancel pending ones (staff with ``skiplock.change_job``),
each recorded in the job's audit trail under the admin user's name."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages

from .models import Job


def _app() -> Any:
    from django.tasks import task_backends

    from .backend import SkiplockBackend

    for backend in task_backends.all():
        if isinstance(backend, SkiplockBackend):
            return backend.app
    raise LookupError("no SkiplockBackend is configured in TASKS")


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):  # type: ignore[misc]
    list_display = ("id", "task", "queue", "state", "priority", "attempt", "created_at")
    list_filter = ("state", "queue", "task")
    search_fields = ("task",)
    actions = ("requeue_dead", "cancel_pending")

    def get_readonly_fields(self, request: Any, obj: Any = None) -> list[str]:
        return [field.name for field in Job._meta.fields]

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def requeue_dead(self, request: Any, queryset: Any) -> None:
        app, who = _app(), request.user.get_username()
        ids = list(queryset.filter(state="dead").values_list("id", flat=True))
        done = [i for i in ids if app.run_sync(app.retry_job(i, who=who))]
        self.message_user(request, f"Requeued {len(done)} dead job(s).", messages.SUCCESS)

    def cancel_pending(self, request: Any, queryset: Any) -> None:
        app, who = _app(), request.user.get_username()
        ids = list(queryset.filter(state="pending").values_list("id", flat=True))
        for job_id in ids:
            app.run_sync(app.cancel_job(job_id, who=who))
        self.message_user(request, f"Cancelled {len(ids)} pending job(s).", messages.SUCCESS)


# What @admin.action sets, without its untyped decorator (mypy --strict runs without Django).
for _action, _label in (
    (JobAdmin.requeue_dead, "Requeue selected dead jobs"),
    (JobAdmin.cancel_pending, "Cancel selected pending jobs"),
):
    _action.short_description = _label  # type: ignore[attr-defined]
    _action.allowed_permissions = ("change",)  # type: ignore[attr-defined]
