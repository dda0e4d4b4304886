"""SQLite's storage: the history's day tables (``history.py``), the WAL (``wal.py``), the id
ledger (``ids.py``) and their upkeep (``upkeep.py``)."""
