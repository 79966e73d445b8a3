"""Tables and records for people: summaries of specs and results (plots imported lazily)."""
