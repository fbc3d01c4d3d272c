"""CloudEvents: the event value, its formats and bindings (HTTP, Kafka, the SQS message)."""
