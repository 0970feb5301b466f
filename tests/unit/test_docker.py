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


SECRET = re.compile(r"PASSWORD|SECRET|TOKEN|CREDENTIAL|API_KEY", re.IGNORECASE)
REQUIRED = re.compile(r"^\$\{(\w+):\?[^}]+\}$")  # ${NAME:?message}: compose refuses without it


def test_no_password_or_secret_has_a_default():
    """Every secret comes from the environment, required (``${NAME:?...}``): none has a
    fallback (``${NAME:-x}``, ``${NAME-x}``) or a fixed value, in a variable of its own or
    as the password of a connection URL."""
    for name, default in re.findall(r"\$\{(\w+):?-([^}]*)\}", COMPOSE.read_text()):
        assert not SECRET.search(name), f"{name} falls back to {default!r}"
    judged = 0
    for service, body in compose()["services"].items():
        env = body.get("environment") or {}
        if isinstance(env, list):  # KEY=VALUE form
            env = dict(item.split("=", 1) for item in env)
        for key, value in env.items():
            if SECRET.search(key) and not key.endswith("_FILE"):  # a path, not a secret
                judged += 1
                assert REQUIRED.match(str(value)), f"{service}: {key} is not required: {value!r}"
            for password in re.findall(r"://[^:/@\s]+:(\$\{[^}]*\}|[^@/\s]*)@", str(value)):
                judged += 1
                assert REQUIRED.match(password), f"{service}: {key} has a fixed password"
    # The Airflow JWT secret and admin password, Postgres's password and its use in Airflow's
    # connection URL (repeated in each Airflow service): there is something to judge.
    assert judged >= 4
