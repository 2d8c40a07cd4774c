"""Test infrastructure, not runtime: throwaway PostgreSQL servers and fresh schemas.

``server`` starts and stops a private cluster from local server binaries (or a
Docker container through testcontainers, or ``$ALKSTORE_PG_DSN``);
``provisioning`` hands the conformance kit a fresh schema per store
(``PostgresEngine.provision()``); ``pgbouncer`` starts a throwaway PgBouncer in
front of a server, and ``behind_pgbouncer`` is the provider the kit certifies
through it. Nothing here runs when an application opens a store.
"""
