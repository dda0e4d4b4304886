-- migration: workflow sequences

CREATE TABLE skiplock_steps_seq (
    job_id  INTEGER NOT NULL,
    name    TEXT NOT NULL,
    seq     INTEGER NOT NULL DEFAULT 1,
    result  TEXT,
    done_at REAL,
    PRIMARY KEY (job_id, name, seq)
);
INSERT INTO skiplock_steps_seq (job_id, name, seq, result, done_at)
    SELECT job_id, name, 1, result, done_at FROM skiplock_steps;
DROP TABLE skiplock_steps;
ALTER TABLE skiplock_steps_seq RENAME TO skiplock_steps;
CREATE TABLE skiplock_signals_seq (
    job_id  INTEGER NOT NULL,
    name    TEXT NOT NULL,
    seq     INTEGER NOT NULL DEFAULT 1,
    kind    TEXT NOT NULL CHECK (kind IN ('signal', 'timeout')),
    payload TEXT,
    at      REAL,
    PRIMARY KEY (job_id, name, seq)
);
INSERT INTO skiplock_signals_seq (job_id, name, seq, kind, payload, at)
    SELECT job_id, name, 1, kind, payload, at FROM skiplock_signals;
DROP TABLE skiplock_signals;
ALTER TABLE skiplock_signals_seq RENAME TO skiplock_signals;
ALTER TABLE skiplock_waits ADD COLUMN signal_seq INTEGER;
ALTER TABLE skiplock_batches ADD COLUMN aborted_at REAL
