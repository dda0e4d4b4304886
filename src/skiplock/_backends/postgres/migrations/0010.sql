-- migration: audit trail

-- Every person action, with a job row or without one (queue pause, resume and limits,
-- retention, task pause), and refused actions and sign-ins: who, when, what, on what.
CREATE TABLE {s}.skiplock_audit (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at     timestamptz NOT NULL DEFAULT now(),
    who    text NOT NULL,
    what   text NOT NULL,
    target text NOT NULL DEFAULT '',
    detail text NOT NULL DEFAULT ''
);
