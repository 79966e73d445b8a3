"""Speculative-decoding policies: draft trees, selection rules, expert predictors, the
routing given to non-true drafts, and the bit sets they share."""
