-- migration: live generations (PostgreSQL only)

-- PostgreSQL's migration 27 (its live generations); SQLite has none. The number is recorded
-- here and changes nothing, so both databases number a migration they both take alike (the
-- next, 28, is lanes on both: docs/design.md, "The storage basement").
