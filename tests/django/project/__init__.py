"""A real Django project for the contrib tests (settings built in tests/django/conftest.py)."""
