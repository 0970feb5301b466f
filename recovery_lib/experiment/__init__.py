"""Recovery experiments: a faulty and a reference run on the same input, judged by the oracle."""
