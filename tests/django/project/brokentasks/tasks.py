"""A tasks module with a bad import, as a typo or a missing dependency makes one."""

from tests.django.project.demo.no_such_module import send_receipt  # type: ignore[import-not-found]  # noqa: F401
