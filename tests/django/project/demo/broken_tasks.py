"""A tasks module that cannot be imported (a deploy that lost a dependency)."""

import skiplock_no_such_dependency  # noqa: F401
