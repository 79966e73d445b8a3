"""The in-process entry points, one module per workload: :func:`.prefill.simulate_prefill`
and :func:`.specdecode.simulate_specdecode`."""
