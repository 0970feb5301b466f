"""Draws docs/architecture.png (run: .venv/bin/python docs/architecture_diagram.py)."""
# ruff: noqa: E501 - the box table reads best one box per line

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

BOXES = {
    # name: (x, y, w, h, text, colour)
    "input": (0.2, 6.2, 2.6, 1.1, "input\nnexmark/ generator\nor recorded topics\n(experiment/inputs.py)", "#dbe9f6"),
    "topic_in": (3.4, 6.2, 2.2, 1.1, "Kafka input topics\n(kafka/: broker, admin)", "#eeeeee"),
    "source": (6.2, 6.2, 2.8, 1.1, "io/source.py\nPython data source\ncut policy (io/cut_policies,\nhooks: ha follow, ...)", "#dbe9f6"),
    "job": (6.2, 4.3, 2.8, 1.4, "job/ (JobSpec.build)\nread_json_input -> dead letters\nyour logic + causal/ services\n(determinant log)", "#fde9c8"),
    "sink": (6.2, 2.4, 2.8, 1.3, "io/sinks/kafka_sink.py\nids from lineage, epoch\nhooks: write guard (ha/fencing)\nwrite fault (runtime/faults)", "#dbe9f6"),
    "topic_out": (3.4, 2.5, 2.2, 1.1, "output topic\n(+ fence records)", "#eeeeee"),
    "oracle": (0.2, 2.5, 2.6, 1.1, "verify/oracle.py\njob's contract -> guarantee\n(exactly-once ...)", "#d9f0d3"),
    "runtime": (9.6, 4.3, 2.7, 1.4, "modes/ registry ->\nruntime/ supervisor,\nha/ standby, replicas\n(JobLaunch -> argv)", "#f6d5d5"),
    "metrics": (3.4, 0.4, 2.2, 1.1, "metrics/ DuckDB store\n(latency collector,\nlistener, reports)", "#eeeeee"),
    "ops": (6.2, 0.4, 2.8, 1.1, "ops/ daemon, GC, reports\ndags/ (Airflow)", "#f6d5d5"),
    "dash": (0.2, 0.4, 2.6, 1.1, "dashboard/ (Streamlit)\nexpectations/ (GX)", "#d9f0d3"),
}
ARROWS = [
    ("input", "topic_in"), ("topic_in", "source"), ("source", "job"), ("job", "sink"),
    ("sink", "topic_out"), ("topic_out", "oracle"), ("runtime", "job"), ("topic_out", "metrics"),
    ("metrics", "dash"), ("ops", "runtime"), ("oracle", "metrics"),
]


def centre(name: str) -> tuple[float, float]:
    x, y, w, h, *_ = BOXES[name]
    return x + w / 2, y + h / 2


def edge(name: str, toward: tuple[float, float]) -> tuple[float, float]:
    """Where the line from the box's centre toward ``toward`` leaves the box."""
    x, y, w, h, *_ = BOXES[name]
    cx, cy = centre(name)
    dx, dy = toward[0] - cx, toward[1] - cy
    scale = min(
        (w / 2 + 0.08) / abs(dx) if dx else float("inf"),
        (h / 2 + 0.08) / abs(dy) if dy else float("inf"),
    )
    return cx + dx * scale, cy + dy * scale


def main() -> None:
    fig, ax = plt.subplots(figsize=(12.5, 7.6))
    for x, y, w, h, text, colour in BOXES.values():
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.05", fc=colour, ec="k"))
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=8.5)
    for a, b in ARROWS:
        ax.add_patch(
            FancyArrowPatch(edge(a, centre(b)), edge(b, centre(a)), arrowstyle="-|>",
                            mutation_scale=14, shrinkA=0, shrinkB=0, color="#444444")
        )  # fmt: skip
    ax.set_xlim(0, 12.5)
    ax.set_ylim(0, 7.6)
    ax.axis("off")
    ax.set_title("One record: input -> topic -> source -> job -> sink -> output -> oracle")
    fig.tight_layout()
    fig.savefig(Path(__file__).with_name("architecture.png"), dpi=90)


if __name__ == "__main__":
    main()
