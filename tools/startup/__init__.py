"""Helpers of `tools/startup_profile.py` (the child processes it times)."""
