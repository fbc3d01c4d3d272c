"""The metrics job over the event archive (design.md §8): the same transforms on AWS Glue
(``--runtime glue``, ``job.py``) and on local PySpark (``python -m spark_glue``)."""
