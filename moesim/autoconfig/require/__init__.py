"""``moesim require``: the least value of one hardware resource that meets a target.

:mod:`.search` is the pure bisection, :mod:`.resources` the table of resources (the profile
field each sets, its unit and physical range), :mod:`.evaluate` the workloads that price a
value (fast evaluator) and confirm it (discrete-event simulation), :mod:`.answer` puts them
together. It lives under ``moesim.autoconfig`` because it sits at that layer (it uses the
auto-configurator's case and the simulators below it; docs/require.md).
"""
