"""spark/worker_bytecode.py: Spark's Python processes of this environment import PySpark from
its compiled bytecode, not from the installed PySpark's zips; other Sparks' zips stay, and the
environment variable turns it off."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from recovery_lib.spark.worker_bytecode import ENV, install, installed

BUNDLED = "/opt/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip"
BUNDLED_PY4J = "/opt/venv/lib/python3.11/site-packages/pyspark/python/lib/py4j-0.10.9.9-src.zip"
OTHER_SPARK = "/opt/spark/python/lib/pyspark.zip"


def path_after_hook(site_dir, env_value=None) -> list[str]:
    """sys.path of a fresh interpreter that had the zips on its path, after site ran the hook
    in ``site_dir`` (as it does for site-packages at start)."""
    code = (
        "import json, site, sys; "
        f"sys.path[:0] = {[BUNDLED, BUNDLED_PY4J, OTHER_SPARK]!r}; "
        f"site.addsitedir({str(site_dir)!r}); print(json.dumps(sys.path))"
    )
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if env_value is not None:
        env[ENV] = env_value
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_installed_pysparks_zips_leave_the_path_and_other_sparks_stay(tmp_path):
    install(tmp_path)
    assert installed(tmp_path)
    path = path_after_hook(tmp_path)
    assert BUNDLED not in path and BUNDLED_PY4J not in path
    assert OTHER_SPARK in path


@pytest.mark.parametrize("off", ["false", "0", "OFF"])
def test_the_variable_turns_it_off(tmp_path, off):
    install(tmp_path)
    assert BUNDLED in path_after_hook(tmp_path, off)


def test_an_outdated_or_missing_hook_is_not_installed(tmp_path):
    assert not installed(tmp_path)
    (tmp_path / "recovery_spark_worker_bytecode.pth").write_text("import os\n")
    assert not installed(tmp_path)


def test_make_install_put_the_hook_into_this_environment():
    assert installed(), "run `make install` (or `recovery spark worker-bytecode`)"
