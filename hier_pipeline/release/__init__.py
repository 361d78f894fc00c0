"""Releasing a model: the one serving folder, the gates a model passes to be served (it beats
popularity and is not worse than the serving one), and the MLflow model registry."""
