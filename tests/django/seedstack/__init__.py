"""A project on the seed's stack (django-tasks-db's ``DatabaseBackend``, django-tasks-concurrent's
layout: ``@periodic`` in an app's ``tasks.py``), switched to skiplock the way docs/django.md
says: its import of ``periodic`` and its ``INSTALLED_APPS`` changed, nothing else."""
