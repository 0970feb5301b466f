"""docker/: no Docker engine runs here, so check what can be checked: the compose file parses,
every image is pinned or built by docker/Dockerfile, every path it names exists, every
setting it passes is one the code reads (our settings, Airflow's config), and the Dockerfile
copies what exists and uses the Python the project requires."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from recovery_lib.settings import Settings

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker" / "compose.yaml"
DOCKERFILE = REPO / "docker" / "Dockerfile"
PUBLIC_IMAGES = {"apache/kafka", "postgres"}


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def airflow_options() -> set[tuple[str, str]]:
    import airflow

    template = Path(airflow.__file__).parent / "config_templates" / "config.yml"
    sections = yaml.safe_load(template.read_text())
    return {(s, o) for s, body in sections.items() for o in (body.get("options") or {})}


def test_compose_parses_and_every_image_is_pinned_or_built():
    services = compose()["services"]
    assert {"kafka", "spark-master", "spark-worker", "postgres", "dashboard"} <= set(services)
    assert {"airflow-api-server", "airflow-scheduler", "airflow-dag-processor"} <= set(services)
    for name, service in services.items():
        if "build" in service:
            context = (COMPOSE.parent / service["build"]["context"]).resolve()
            assert (context / service["build"]["dockerfile"]).exists(), name
        else:
            image, _, tag = service["image"].partition(":")
            assert image in PUBLIC_IMAGES and tag and tag != "latest", name


def test_every_setting_is_read_by_the_code():
    fields = Settings.model_fields
    ours = {f"RECOVERY_{n.upper()}" for n in fields} | {
        f.validation_alias for f in fields.values() if isinstance(f.validation_alias, str)
    }
    known_airflow = airflow_options()
    for name, service in compose()["services"].items():
        env = service.get("environment") or {}
        for key in env:
            if key.startswith("RECOVERY_") or key == "KAFKA_BOOTSTRAP":
                assert key in ours, f"{name}: {key} is not a setting (recovery_lib/settings.py)"
            elif key.startswith("AIRFLOW__"):
                _, section, option = key.split("__", 2)
                assert (section.lower(), option.lower()) in known_airflow, f"{name}: {key}"


def test_paths_and_commands_exist():
    services = compose()["services"]
    jobs_file = services["dashboard"]["environment"]["RECOVERY_JOBS_FILE"]
    assert jobs_file.startswith("/opt/spark-recovery/")
    assert (REPO / jobs_file.removeprefix("/opt/spark-recovery/")).exists()
    assert "dashboard/app.py" in services["dashboard"]["command"]
    assert (REPO / "dashboard" / "app.py").exists()
    for name in ("spark-master", "spark-worker"):
        assert "spark-class org.apache.spark.deploy" in services[name]["command"]


def test_dockerfile_copies_what_exists_with_the_required_python():
    text = DOCKERFILE.read_text()
    for source in re.findall(r"^COPY (.+) \./", text, flags=re.M):
        for item in source.split():
            assert (REPO / item).exists(), item
    pyproject = (REPO / "pyproject.toml").read_text()
    required = re.search(r'requires-python = ">=(\d+\.\d+)', pyproject).group(1)
    assert f"FROM python:{required}-" in text
    assert f"python{required}/site-packages/pyspark" in text
