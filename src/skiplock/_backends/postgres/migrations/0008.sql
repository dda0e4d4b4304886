-- migration: trace context

-- The W3C trace context (JSON: traceparent, tracestate) of the span that enqueued the job,
-- so its run's span joins the same trace (the otel extra); NULL when tracing is off.
ALTER TABLE {s}.skiplock_jobs ADD COLUMN trace_context text;
