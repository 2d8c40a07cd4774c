"""alkstore-conformance: certify any alkstore engine against the contract.

Run it with ``alkstore-conformance run --engine NAME`` or
``pytest --pyargs alkstore_conformance.suite --engine NAME -n auto``.
"""

__version__ = "0.1.0"

SUITE_PACKAGE = "alkstore_conformance.suite"
"""The installed package holding the property tests."""

__all__ = ["SUITE_PACKAGE", "__version__"]
