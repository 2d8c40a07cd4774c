"""Test infrastructure, not runtime: throwaway PostgreSQL servers and fresh schemas.

``server`` starts and stops a private cluster from local server binaries (or a
Docker container through testcontainers, or ``$ALKSTORE_PG_DSN``);
``provisioning`` hands the conformance kit a fresh schema per store
(``PostgresEngine.provision()``). Nothing here runs when an application opens
a store.
"""
