"""The archive spool's shutdown extension, as the Lambda layer holds it (infra/spool_layer.py)."""
