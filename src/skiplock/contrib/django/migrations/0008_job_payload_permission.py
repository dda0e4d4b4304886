"""The ``view_job_payload`` permission on the unmanaged ``Job`` model (issue 22): seeing a job's
arguments, result and errors in the admin takes more than ``view_job``. Creates no table."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations


class Migration(migrations.Migration):  # type: ignore[misc]
    dependencies: ClassVar[list[Any]] = [("skiplock", "0007_audit_trail")]
    operations: ClassVar[list[Any]] = [
        migrations.AlterModelOptions(
            name="job",
            options={
                "managed": False,
                "ordering": ("-id",),
                "permissions": (
                    ("view_job_payload", "Can view job arguments, results and errors"),
                ),
            },
        )
    ]
