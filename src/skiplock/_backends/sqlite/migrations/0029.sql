-- migration: database number (PostgreSQL only)

-- PostgreSQL's migration 29 (each database's number among several, from which its job ids
-- count); SQLite serves one machine, as database 0, and has none. The number is recorded here
-- and changes nothing, so both databases keep numbering their migrations alike.
