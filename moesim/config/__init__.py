"""Configuration data (pydantic only): model shapes and the catalog, device profiles,
weight formats, the run configuration of each workload (:mod:`.prefill`, :mod:`.decode`, :mod:`.specdecode`, the
draft they share in :mod:`.draft`) and the one schema that reads them as flat parameters (:mod:`.schema`)."""
