-- migration: history apart

-- The live jobs keep the table, renamed (its rows, indexes and AUTOINCREMENT counter go with
-- it). Finished jobs move to a table per UTC day (sqlite_history.py) and skiplock_jobs becomes
-- the view of them all, with the same columns. Nothing is moved here: the finished rows an
-- upgrade finds stay in the live table until their retention deletes them.
ALTER TABLE skiplock_jobs RENAME TO skiplock_jobs_live;
CREATE VIEW skiplock_jobs AS SELECT * FROM skiplock_jobs_live
