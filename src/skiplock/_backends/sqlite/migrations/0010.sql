-- migration: audit trail

-- Every person action, with a job row or without one, and refused actions and sign-ins
CREATE TABLE skiplock_audit (
    id     INTEGER PRIMARY KEY,
    at     REAL NOT NULL,
    who    TEXT NOT NULL,
    what   TEXT NOT NULL,
    target TEXT NOT NULL DEFAULT '',
    detail TEXT NOT NULL DEFAULT ''
)
