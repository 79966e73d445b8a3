"""``moesim validate``: the case registry (:mod:`.registry`) and the cases of each
reference, one module each (estream, host, hexagon, specdecode)."""
