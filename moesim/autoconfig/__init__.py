"""Auto-configuration: the search lives in moesim.policies.prefill.search (pure); this package
adds the exhaustive discrete-event check and the latency-memory plot."""
