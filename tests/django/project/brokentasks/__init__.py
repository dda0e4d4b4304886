"""An installed app whose ``tasks`` module fails to import (test_task_names.py)."""
