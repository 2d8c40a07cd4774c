"""How the kit runs and judges a certification: the pytest plugin (entry point
``pytest11``) and the ``alkstore-conformance`` CLI, the run's state and modes, the
property manifest (``manifest.toml``) and its cross-check against the suite,
per-property results, the verdict and the JSON report (``report.schema.json``),
and the contract document's property blocks (``contract_doc``).

Internal to the kit: engine authors use the public names ``alkstore_conformance``
lists, not these modules.
"""
