"""The conformance property tests (run with ``--engine NAME``; see the plugin)."""
