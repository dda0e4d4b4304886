"""PostgreSQL's storage: the job table's partitions and the live segments (``partitions``), the
rotation of the live generations (``rotation``), what holds a detached table (``holders``),
a person's reads off the live segments (``reads``), and the backend's storage operations
(``operations``)."""
