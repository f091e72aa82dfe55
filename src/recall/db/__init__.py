"""The storage layer: every statement `recall` executes lives behind this package.

Owns where the database is (a URL or the embedded server), the connection pool, the numbered
migrations, row-level security, the named SQL blocks of `queries.sql` and the functions that run
them and return typed rows, plus the writer's local SQLite outbox. Nothing outside this package
calls `execute`. May import the bottom floor, `recall.embeddings` and `recall.search`.
"""
