"""``recovery reproduce``: each paper's key results beside ours.

``paper_numbers.json`` holds the papers' own numbers, each with its table or figure
(``papers.py`` reads it); one extractor per paper (``extract_<paper>.py``) reads our benchmark
reports (docs/benchmarks/*.json) into ``Measured`` rows keyed by the paper row they answer;
``report.py`` puts them side by side (Markdown + JSON + PNG) and lists every row where ours
disagrees, with why.
"""
