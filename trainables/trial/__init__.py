"""The trial glue: the Ray Tune trainable that runs one trial (`trainable`), and the adapter
that runs the loop inside a Ray Train worker or the Tune trial process (`worker`).

Layer: the top of `trainables`; only the orchestrator imports it.
"""
