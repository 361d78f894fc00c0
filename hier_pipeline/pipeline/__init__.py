"""The one runner: `prepare`, `train_interest_model`, `run_chain` (prepare -> train -> register ->
embed -> hierarchy -> tokens), `evaluate_dataset` and `fit` (torchrun), plus the dataset sources.
The CLI, the assets, the benchmarks and the test fixtures call these; nothing is re-exported, so
importing `pipeline.source` stays light."""
