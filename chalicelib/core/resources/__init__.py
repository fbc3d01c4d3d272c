"""The Knative-shaped resources: their types, validation, defaults and status."""
