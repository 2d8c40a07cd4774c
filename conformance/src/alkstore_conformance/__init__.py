"""alkstore-conformance: certify any alkstore engine against the contract.

Run it with ``alkstore-conformance run --engine NAME`` or
``pytest --pyargs alkstore_conformance.suite --engine NAME -n auto``.

Public, for an engine's author and a report's reader (everything else may change
in any release):

- this module: ``__version__``, ``SUITE_PACKAGE`` and ``report_schema()``;
- ``alkstore_conformance.driver_suite``: ``driver_suite``, ``DriverFactory`` and
  ``opened_drivers``, the seam tests an engine runs from its own tests;
- ``alkstore_conformance.hooks``: the optional provider hooks the kit uses when an
  engine offers them (``native_connection_factory``, ``describe_backend``,
  ``open_with_driver_wrapper``, ``provision_beside``);
- what is run rather than imported: the suite (``alkstore_conformance.suite``), the
  ``alkstore-conformance`` command, the pytest plugin (entry point ``pytest11``,
  module ``alkstore_conformance.certify.plugin``) and the mutant engines (entry-point
  group ``alkstore.engines.selftest``, in ``alkstore_conformance.selftest``).

Internal: ``certify`` (the plugin and CLI, run state and modes, the manifest, results
and the report), ``helpers`` (what the suite's tests share) and ``model`` (the
reference model the stateful test runs beside the engine).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

SUITE_PACKAGE = "alkstore_conformance.suite"
"""The installed package holding the property tests."""


def report_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) every conformance report validates against."""
    # Imported on call: importing the package (as every child process of the suite
    # does) must not load the plugin's machinery.
    from .certify.reporting import report_schema as shipped_schema

    return shipped_schema()


__all__ = ["SUITE_PACKAGE", "__version__", "report_schema"]
