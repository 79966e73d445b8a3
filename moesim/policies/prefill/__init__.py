"""Prefill policies: the streaming plan of each policy (:mod:`.plan`) and the
auto-configurator's max-plus search over group size, banks and queue depth (:mod:`.search`)."""
