"""The jobs: one module per job, each with its options, its run and its result."""
