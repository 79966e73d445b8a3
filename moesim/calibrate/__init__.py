"""Fit device-profile fields to measurements or published figures (scipy), write them back."""
