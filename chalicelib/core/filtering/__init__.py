"""Trigger filters: the dialects, CloudEvents SQL, and the index that routes an event."""
