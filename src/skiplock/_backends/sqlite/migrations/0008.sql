-- migration: trace context

-- The W3C trace context (JSON) of the span that enqueued the job (the otel extra)
ALTER TABLE skiplock_jobs ADD COLUMN trace_context TEXT
