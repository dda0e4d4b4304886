"""A module a job row names but no task of the project registers (tests/django/test_task_names):
importing it is the side effect a row in the jobs table must not be able to cause."""


def boom() -> None:
    raise AssertionError("never runs")
