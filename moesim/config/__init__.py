"""Configuration data (pydantic only): model shapes and the catalog, device profiles,
weight formats, and the run configuration of each workload (:mod:`.prefill`, :mod:`.specdecode`)."""
