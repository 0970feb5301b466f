"""``recovery advise <job|pipeline>``: which recovery mode to use, and why.

``facts.py`` measures what the choice depends on (the job's declared nondeterminism and order
sensitivity, a pipeline's stages and cycles, the input's key skew sampled from its topics, the
outage the user can accept); ``rules.py`` turns the facts into a recommendation whose every
reason cites a number our benchmarks measured (docs/benchmarks), in the spirit of CheckMate's
finding that the best protocol depends on skew and cycles.
"""
