-- migration: database number

-- This database's place among several (issue 46, skiplock/_lanes.py): its number n, from
-- which its job ids count (n * 10^13 and up; 0, the App's own database, from 1), so that an id
-- names the database it lives in. One row: written by the first migrate or open that names
-- the database, and checked by every later one (DATABASE_NUMBER). A database that already
-- made jobs was some App's own: it is number 0, and naming it otherwise is refused.
CREATE TABLE {s}.skiplock_database (
    one    boolean PRIMARY KEY DEFAULT true CHECK (one),
    number integer NOT NULL CHECK (number BETWEEN 0 AND 899),
    set_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO {s}.skiplock_database (number) SELECT 0 FROM {s}.skiplock_job_ids WHERE is_called;
