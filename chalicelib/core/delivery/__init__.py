"""Delivery policy as data: what an answer means, backoff, outcomes."""
