"""The Helm chart, rendered and linted with Helm's own Go SDK (helm-python-sdk), every manifest validated
against the Kubernetes OpenAPI schemas of three versions (kubernetes-validate). Offline: no cluster, no network."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

CHART = Path(__file__).parent.parent / "helm" / "repoinstall"
KUBERNETES = ["1.29.0", "1.33.0", "1.37.0"]
SECRET_URL = "https://deploy:s3cr3t@pypi.example/simple"
PYLOCK = """lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.11"

[[packages]]
name = "adaptor"
version = "1.4"
wheels = [{url = "https://files.example/adaptor-1.4-py3-none-any.whl", hashes = {sha256 = "%s"}}]
""" % ("0" * 64)
LOCK_MOUNT = {"name": "repoinstall-lock", "mountPath": "/etc/repoinstall/lock", "readOnly": True}

VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "requirements": {"requirements": ["adaptor==1.4", "other[fast]>=2,<3 ; python_version >= '3.10'"]},
    "everything": {
        "image": {"repository": "registry.example/repoinstall", "tag": "0.1.0-py311", "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "registry"}],
        "requirements": ["adaptor==1.4"],
        "repo": {"mountPath": "/opt/repo", "subPath": "python"},
        "persistence": {"create": False, "existingClaim": "shared-nfs"},
        "index": {
            "extraUrls": ["https://mirror.example/simple"],
            "existingSecret": "index-credentials",
            "secretKey": "url",
            "netrcSecret": "index-netrc",
            "cacheTtl": 30,
            "refresh": True,
        },
        "lock": {"staleAfter": 300, "heartbeat": 30, "waitTimeout": 600, "disabled": False},
        "install": {
            "timeout": 1200,
            "jobs": 2,
            "installer": "uv",
            "lockFile": PYLOCK,
            "lockFileName": "pylock.prod.toml",
        },
        "prewarm": {"enabled": True, "backoffLimit": 5, "activeDeadlineSeconds": 900, "ttlSecondsAfterFinished": 60},
        "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy.example:3128"}],
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "nodeSelector": {"kubernetes.io/arch": "amd64"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "workers", "effect": "NoSchedule"}],
        "exampleWorker": {"enabled": True, "replicas": 3},
        "volumePermissions": {"enabled": True, "image": {"repository": "busybox", "tag": "1.36"}},
    },
    "single node": {"requirements": ["adaptor==1.4"], "lock": {"disabled": True}, "prewarm": {"enabled": False}},
    "lock file": {"install": {"lockFile": PYLOCK}, "exampleWorker": {"enabled": True}},
    "lock ConfigMap": {
        "install": {"lockConfigMap": {"name": "locks-v2", "key": "requirements-lock.txt"}},
        "exampleWorker": {"enabled": True},
    },
    "registry": {
        "requirements": ["adaptor==1.4"],
        "registry": {
            "repository": "registry.example:5000/trees",
            "existingSecret": "registry-auth",
            "caSecret": "registry-ca",
            "plainHttp": False,
        },
        "exampleWorker": {"enabled": True},
    },
}
DIGEST = "sha256:" + "ab" * 32
#: Trees mounted as image volumes: the API has them from 1.33 on (beta; on by default 1.35, GA 1.36).
IMAGE_VOLUMES = {
    "requirements": ["pandas==2.2.3", "tools==1.0"],
    "registry": {"repository": "registry.example:5000/trees", "existingSecret": "registry-auth"},
    "imageVolumes": {
        "trees": [
            {"name": "pandas", "reference": f"registry.example:5000/trees@{DIGEST}", "pullPolicy": "IfNotPresent"},
            {"name": "tools", "reference": "registry.example:5000/trees:tools-1-cp311-cp311"},
        ]
    },
    "imagePullSecrets": [{"name": "workers-image"}],
    "exampleWorker": {"enabled": True},
}
IMAGE_VOLUME_KUBERNETES = ["1.33.0", "1.36.0", "1.37.0"]


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    chart = helm.Chart.load(CHART)
    rendered = chart.render(values, name="rel", namespace="workers", is_install=True)
    documents = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        documents += [doc for doc in yaml.safe_load_all(text) if doc]
    return documents


def of_kind(documents: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in documents if d["kind"] == kind]


@pytest.mark.parametrize("name", list(VALUE_SETS))
def test_chart_renders_lints_strictly_and_validates(name: str) -> None:
    values = VALUE_SETS[name]
    for version in KUBERNETES:
        report = helm.lint(CHART, values, strict=True, kube_version=f"v{version}")
        problems = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
        assert not problems, (version, problems)
    documents = render(values)
    assert documents
    for document in documents:
        for version in KUBERNETES:
            kubernetes_validate.validate(document, version, strict=True)
        labels = document["metadata"]["labels"]
        for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
                    "app.kubernetes.io/managed-by", "helm.sh/chart"):  # fmt: skip
            assert key in labels, (document["kind"], key)


def pod_specs(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d["spec"]["template"]["spec"] for d in documents if d["kind"] in ("Job", "Deployment")]


def test_init_container_command_mounts_and_security() -> None:
    documents = render(VALUE_SETS["everything"])
    worker = of_kind(documents, "Deployment")[0]["spec"]["template"]["spec"]
    (_permissions, init) = worker["initContainers"]
    assert init["args"][:3] == ["ensure", "--requirement", "/etc/repoinstall/requirements.txt"]
    assert init["args"][3:7] == ["--requirement", "/etc/repoinstall/lock/pylock.prod.toml", "--repo", "/opt/repo"]
    assert init["args"][7:] == ["--extra-index-url", "https://mirror.example/simple"]
    assert init["command"] == ["repoinstall"]  # not left to the image's ENTRYPOINT: the workers' image has none
    mounts = {m["name"]: m for m in init["volumeMounts"]}
    assert mounts["repoinstall-repo"] == {"name": "repoinstall-repo", "mountPath": "/opt/repo", "subPath": "python"}
    assert mounts["repoinstall-requirements"]["readOnly"] and mounts["repoinstall-netrc"]["readOnly"]
    assert mounts["repoinstall-lock"] == LOCK_MOUNT
    env = {e["name"]: e for e in init["env"]}
    assert env["REPOINSTALL_STALE_AFTER"]["value"] == "300" and env["REPOINSTALL_HEARTBEAT"]["value"] == "30"
    assert env["REPOINSTALL_NO_LOCK"]["value"] == "0" and env["REPOINSTALL_REFRESH"]["value"] == "1"
    assert env["NETRC"]["value"] == "/etc/repoinstall/netrc/netrc"
    assert env["REPOINSTALL_INSTALLER"]["value"] == "uv"
    assert init["securityContext"]["readOnlyRootFilesystem"] is True
    assert worker["securityContext"]["runAsNonRoot"] is True and worker["securityContext"]["fsGroup"] == 10001
    assert worker["nodeSelector"] == {"kubernetes.io/arch": "amd64"} and worker["tolerations"][0]["key"] == "dedicated"
    (container,) = worker["containers"]
    repo_mount = {"name": "repoinstall-repo", "mountPath": "/opt/repo", "readOnly": True, "subPath": "python"}
    assert repo_mount in container["volumeMounts"]
    volumes = {v["name"]: v for v in worker["volumes"]}
    assert volumes["repoinstall-repo"]["persistentVolumeClaim"]["claimName"] == "shared-nfs"
    assert {"tmp", "repoinstall-tmp"} <= set(volumes)  # the workload's own tmp volume and ours do not clash
    assert not of_kind(documents, "PersistentVolumeClaim")  # an existing claim is used, none created
    assert "--together" not in init["args"]
    (together,) = of_kind(render({"requirements": ["a==1", "b==2"], "install": {"together": True}}), "Job")
    assert together["spec"]["template"]["spec"]["containers"][0]["args"][-1] == "--together"
    single = render(VALUE_SETS["single node"])
    assert not of_kind(single, "Job")
    assert of_kind(single, "PersistentVolumeClaim")[0]["spec"]["accessModes"] == ["ReadWriteMany"]


def test_prewarm_job_is_a_bounded_hook() -> None:
    documents = render(VALUE_SETS["everything"])
    (job,) = of_kind(documents, "Job")
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "post-install,post-upgrade"
    assert annotations["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
    assert job["spec"]["backoffLimit"] == 5 and job["spec"]["activeDeadlineSeconds"] == 900
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"][0] == "ensure" and job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert not of_kind(render({}), "Job")  # nothing to prewarm by default


def test_credentials_come_from_a_secret_and_never_from_a_configmap() -> None:
    documents = render(VALUE_SETS["everything"])
    for spec in pod_specs(documents):
        for container in spec.get("initContainers", []) + spec["containers"]:
            env = {e["name"]: e for e in container.get("env", [])}
            if "PIP_INDEX_URL" in env:
                assert env["PIP_INDEX_URL"] == {
                    "name": "PIP_INDEX_URL",
                    "valueFrom": {"secretKeyRef": {"name": "index-credentials", "key": "url"}},
                }
    assert any("PIP_INDEX_URL" in str(spec) for spec in pod_specs(documents))
    (config,) = [c for c in of_kind(documents, "ConfigMap") if "requirements.txt" in c["data"]]
    assert config["data"]["requirements.txt"].splitlines()[1:] == ["adaptor==1.4"]
    assert not of_kind(documents, "Secret")  # the chart never writes credentials anywhere
    chart = helm.Chart.load(CHART)
    with pytest.raises(helm.HelmError):
        chart.validate_schema({"index": {"url": SECRET_URL}})
    with pytest.raises(helm.HelmError):
        chart.validate_schema({"requirements": [f"adaptor @ {SECRET_URL}/adaptor-1.0.whl"]})


@pytest.mark.parametrize(
    "values",
    [
        {"image": {"repository": "", "pullPolicy": "IfNotPresent"}},
        {"image": {"repository": "x", "pullPolicy": "Sometimes"}},
        {"requirements": ["--index-url=http://evil.example/simple"]},
        {"requirements": ["adaptor==1.4\nother==2"]},
        {"lock": {"staleAfter": -1}},
        {"lock": {"heartbeat": 0}},
        {"install": {"jobs": 0}},
        {"install": {"installer": "conda"}},
        {"persistence": {"accessModes": ["ReadWriteSometimes"]}},
        {"persistence": {"size": "ten gigs"}},
        {"repo": {"mountPath": "relative/path"}},
        {"prewarm": {"backoffLimit": -1}},
        {"frobnicate": True},
        {"index": {"url": "https://pypi.example/simple", "existingSecret": "creds"}},  # the Secret would be ignored
        {"persistence": {"create": False}},  # no claim to mount at all
        {"command": []},
    ],
    ids=lambda v: str(v)[:40],
)
def test_schema_rejects_invalid_values(values: dict[str, Any]) -> None:
    chart = helm.Chart.load(CHART)
    with pytest.raises(helm.HelmError):
        chart.validate_schema(values)
    with pytest.raises(helm.HelmError):
        chart.render(values, name="rel", namespace="workers", is_install=True)


@pytest.mark.parametrize(
    ("values", "where", "way_out"),
    [
        ({"index": {"url": SECRET_URL}}, "/index/url", "index.existingSecret"),
        ({"index": {"extraUrls": [SECRET_URL]}}, "/index/extraUrls/0", "index.netrcSecret"),
        ({"requirements": [f"adaptor @ {SECRET_URL}/adaptor-1.0.whl"]}, "/requirements/0", "index.existingSecret"),
        ({"index": {"url": "https://pypi.example/simple", "existingSecret": "creds"}}, "/index/url", "existingSecret"),
    ],
    ids=["url", "extraUrls", "requirements", "url and existingSecret"],
)
def test_schema_refusals_of_credentials_say_what_to_do_and_never_echo_them(
    values: dict[str, Any], where: str, way_out: str
) -> None:
    """Helm prints a failed `not` as "'not' failed": the schema's refusals name the value to use instead."""
    chart = helm.Chart.load(CHART)
    for attempt in (
        lambda: chart.validate_schema(values),
        lambda: chart.render(values, name="rel", namespace="workers", is_install=True),
    ):
        with pytest.raises(helm.HelmError) as refused:
            attempt()
        message = str(refused.value)
        assert f"at '{where}': value must be '" in message and way_out in message, message
        assert "'not' failed" not in message and "s3cr3t" not in message, message


def lock_pods(documents: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(pod template, its repoinstall container) of the prewarm Job and the example worker."""
    found = []
    for kind in ("Job", "Deployment"):
        (owner,) = of_kind(documents, kind)
        template = owner["spec"]["template"]
        spec = template["spec"]
        (container,) = [c for c in spec.get("initContainers", []) + spec["containers"] if c["name"] == "repoinstall"]
        found.append((template, container))
    return found


def test_an_inline_lock_file_is_a_configmap_mounted_read_only_and_ensured() -> None:
    values = {"requirements": ["other==2.0"], "install": {"lockFile": PYLOCK}, "exampleWorker": {"enabled": True}}
    documents = render(values)
    (lock,) = [c for c in of_kind(documents, "ConfigMap") if c["metadata"]["name"] == "rel-repoinstall-lock"]
    assert lock["data"] == {"pylock.toml": PYLOCK}  # the content as given, under its name
    for template, container in lock_pods(documents):
        # The requirements too, in the same run: ensure -r requirements.txt -r <lock>.
        assert container["args"][:6] == [
            "ensure",
            "--requirement",
            "/etc/repoinstall/requirements.txt",
            "--requirement",
            "/etc/repoinstall/lock/pylock.toml",
            "--repo",
        ]
        assert LOCK_MOUNT in container["volumeMounts"]
        volumes = {v["name"]: v for v in template["spec"]["volumes"]}
        assert volumes["repoinstall-lock"]["configMap"] == {
            "name": "rel-repoinstall-lock",
            "items": [{"key": "pylock.toml", "path": "pylock.toml"}],
        }
        checksum = template["metadata"]["annotations"]["checksum/lock"]
        assert len(checksum) == 64
    assert "the lock file /etc/repoinstall/lock/pylock.toml" in notes(values)

    def checksums(values: dict[str, Any]) -> set[str]:
        return {t["metadata"]["annotations"]["checksum/lock"] for t, _ in lock_pods(render(values))}

    (same,) = checksums(values)  # the Job's and the worker's agree
    assert checksums(values | {"podAnnotations": {"team": "workers"}}) == {same}
    (job,) = of_kind(render(values | {"podAnnotations": {"team": "workers"}}), "Job")
    assert job["spec"]["template"]["metadata"]["annotations"] == {"team": "workers", "checksum/lock": same}
    changed = values | {"install": {"lockFile": PYLOCK.replace("1.4", "1.5")}}
    assert checksums(changed) != {same}  # a changed lock makes new pods
    renamed = values | {"install": {"lockFile": PYLOCK, "lockFileName": "pylock.prod.toml"}}
    assert checksums(renamed) != {same}
    # A lock file alone: the Job still runs, and the requirements file (empty) is not passed.
    documents = render({"install": {"lockFile": PYLOCK, "lockFileName": "requirements-lock.txt"}})
    (job,) = of_kind(documents, "Job")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"][:4] == ["ensure", "--requirement", "/etc/repoinstall/lock/requirements-lock.txt", "--repo"]


def test_a_lock_file_from_an_existing_configmap_is_mounted_the_same_way() -> None:
    values = VALUE_SETS["lock ConfigMap"]
    documents = render(values)
    assert [c["metadata"]["name"] for c in of_kind(documents, "ConfigMap")] == ["rel-repoinstall-requirements"]
    for template, container in lock_pods(documents):
        assert container["args"][:4] == [
            "ensure",
            "--requirement",
            "/etc/repoinstall/lock/requirements-lock.txt",
            "--repo",
        ]
        assert LOCK_MOUNT in container["volumeMounts"]
        volumes = {v["name"]: v for v in template["spec"]["volumes"]}
        assert volumes["repoinstall-lock"]["configMap"] == {
            "name": "locks-v2",
            "items": [{"key": "requirements-lock.txt", "path": "requirements-lock.txt"}],
        }
    (checksum,) = {t["metadata"]["annotations"]["checksum/lock"] for t, _ in lock_pods(documents)}
    other = render({"install": {"lockConfigMap": {"name": "locks-v3", "key": "requirements-lock.txt"}}})
    (job,) = of_kind(other, "Job")
    assert job["spec"]["template"]["metadata"]["annotations"]["checksum/lock"] != checksum  # a new name rolls
    # Without a lock file, nothing of it: no volume, no mount, no annotation.
    for without in (VALUE_SETS["requirements"] | {"exampleWorker": {"enabled": True}}, {}):
        documents = render(without)
        assert "repoinstall-lock" not in str(documents) and "checksum/lock" not in str(documents)
        assert "/etc/repoinstall/lock" not in notes(without)


@pytest.mark.parametrize(
    "values",
    [
        {"install": {"lockFileName": "pylock.toml"}},
        {"install": {"lockFileName": "pylock.prod-2.toml"}},
        {"install": {"lockFileName": "requirements.lock.txt"}},
        {"install": {"lockFile": 'vcs = {url = "ssh://git@git.example/adaptor.git"}\n'}},  # a user, not a secret
        {"install": {"lockConfigMap": {}}},
        {"install": {"lockFile": "", "lockConfigMap": {"name": "locks", "key": "pylock.toml"}}},
        {"install": {"lockFile": PYLOCK, "lockConfigMap": {}}},
    ],
    ids=lambda v: str(v)[:50],
)
def test_schema_accepts_lock_files(values: dict[str, Any]) -> None:
    helm.Chart.load(CHART).validate_schema(values)


@pytest.mark.parametrize(
    ("values", "where", "way_out"),
    [
        (
            {"install": {"lockFile": PYLOCK, "lockConfigMap": {"name": "locks", "key": "pylock.toml"}}},
            "/install/lockFile",
            "empty when install.lockConfigMap is set",
        ),
        ({"install": {"lockConfigMap": {"name": "locks"}}}, "/install/lockConfigMap", "both set"),
        ({"install": {"lockConfigMap": {"key": "pylock.toml"}}}, "/install/lockConfigMap", "both set"),
        ({"install": {"lockConfigMap": {"name": "", "key": "pylock.toml"}}}, "/install/lockConfigMap", "both set"),
        ({"install": {"lockFileName": "lock.toml"}}, "/install/lockFileName", "pylock.<name>.toml (PEP 751)"),
        ({"install": {"lockFileName": "pylock.a.b.toml"}}, "/install/lockFileName", "<name>.txt"),
        ({"install": {"lockFileName": "requirements.in"}}, "/install/lockFileName", "pylock.toml"),
        ({"install": {"lockFileName": "../pylock.toml"}}, "/install/lockFileName", "pylock.toml"),
        (
            {"install": {"lockConfigMap": {"name": "locks", "key": "uv.lock"}}},
            "/install/lockConfigMap/key",
            "pylock.<name>.toml (PEP 751)",
        ),
        (
            {"install": {"lockFile": PYLOCK.replace("https://files.example", SECRET_URL)}},
            "/install/lockFile",
            "index.existingSecret",
        ),
    ],
    ids=["both", "no key", "no name", "empty name", "name", "dotted name", ".in", "path", "key", "credentials"],
)
def test_schema_refusals_of_lock_files_say_what_to_do(values: dict[str, Any], where: str, way_out: str) -> None:
    chart = helm.Chart.load(CHART)
    for attempt in (
        lambda: chart.validate_schema(values),
        lambda: chart.render(values, name="rel", namespace="workers", is_install=True),
    ):
        with pytest.raises(helm.HelmError) as refused:
            attempt()
        message = str(refused.value)
        assert f"at '{where}': value must be '" in message and way_out in message, message
        assert "'not' failed" not in message and "s3cr3t" not in message and "lock-version" not in message, message


def test_schema_refuses_a_lock_file_name_that_is_its_own_message() -> None:
    """The if/then's const is no file name: given as one, the pattern beside it refuses it."""
    chart = helm.Chart.load(CHART)
    install = json.loads((CHART / "values.schema.json").read_text())["properties"]["install"]
    const = install["properties"]["lockFileName"]["then"]["const"]
    assert install["properties"]["lockConfigMap"]["properties"]["key"]["then"]["const"] == const
    for values in (
        {"install": {"lockFileName": const}},
        {"install": {"lockConfigMap": {"name": "locks", "key": const}}},
        {"install": {"lockConfigMap": {"name": "Locks_2", "key": "pylock.toml"}}},  # not a ConfigMap's name
        {"install": {"lockConfigMap": {"name": "locks", "key": "pylock.toml", "optional": True}}},
    ):
        with pytest.raises(helm.HelmError):
            chart.validate_schema(values)


def test_the_chart_works_as_a_subchart_and_takes_a_command() -> None:
    chart = helm.Chart.load(CHART)
    chart.validate_schema({"enabled": False})  # condition: repoinstall.enabled in a parent chart
    chart.validate_schema({"persistence": {"create": False, "existingClaim": "shared"}})
    documents = render(
        {"requirements": ["adaptor==1.4"], "command": ["/opt/venv/bin/repoinstall"], "prewarm": {"enabled": True}}
    )
    (job,) = of_kind(documents, "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["/opt/venv/bin/repoinstall"]


def test_the_prewarm_job_fits_helm_and_bad_input_is_not_retried() -> None:
    values = {
        "requirements": ["adaptor==1.4"],
        "podLabels": {"team": "workers"},
        "podAnnotations": {"sidecar.istio.io/inject": "false"},
        "exampleWorker": {"enabled": True},
    }
    documents = render(values)
    (job,) = of_kind(documents, "Job")
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules == [
        {"action": "FailJob", "onExitCodes": {"containerName": "repoinstall", "operator": "In", "values": [2]}}
    ]
    for spec_owner in [job, of_kind(documents, "Deployment")[0]]:
        template = spec_owner["spec"]["template"]
        assert template["spec"]["automountServiceAccountToken"] is False
        assert template["metadata"]["labels"]["team"] == "workers"
        assert template["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
    for version in KUBERNETES:
        for document in documents:
            kubernetes_validate.validate(document, version, strict=True)
    notes = helm.Chart.load(CHART).render(values, name="rel", namespace="workers", is_install=True)
    text = next(t for path, t in notes.items() if path.endswith("NOTES.txt"))
    assert "logs job/" not in text and "app.kubernetes.io/component=prewarm" in text  # the Job is gone on success


def notes(values: dict[str, Any]) -> str:
    rendered = helm.Chart.load(CHART).render(values, name="rel", namespace="workers", is_install=True)
    return next(text for path, text in rendered.items() if path.endswith("NOTES.txt"))


def validate_pod(spec: dict[str, Any]) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker"}, "spec": spec}
    for version in KUBERNETES:
        kubernetes_validate.validate(pod, version, strict=True)


def test_notes_print_a_plain_yaml_snippet_for_any_chart() -> None:
    values = {**VALUE_SETS["everything"], "exampleWorker": {"enabled": True}}
    text = notes(values)
    _, _, rest = text.partition("# --- repoinstall snippet: begin ---\n")
    block, end, _ = rest.partition("# --- repoinstall snippet: end ---")
    assert end, text
    snippet = yaml.safe_load(block)
    assert set(snippet) == {"extraInitContainers", "extraVolumes", "extraVolumeMounts", "podSecurityContext"}
    worker = of_kind(render(values), "Deployment")[0]["spec"]["template"]["spec"]
    # What the snippet pastes is what the chart's own workload runs, values applied.
    assert snippet["extraInitContainers"] == worker["initContainers"]
    assert [c["name"] for c in snippet["extraInitContainers"]] == ["repoinstall-volume-permissions", "repoinstall"]
    assert all(volume in worker["volumes"] for volume in snippet["extraVolumes"])
    assert snippet["extraVolumeMounts"] == [m for m in worker["containers"][0]["volumeMounts"] if m["name"] != "tmp"]
    assert snippet["podSecurityContext"] == worker["securityContext"]
    validate_pod(
        {
            "securityContext": snippet["podSecurityContext"],
            "initContainers": snippet["extraInitContainers"],
            "volumes": snippet["extraVolumes"],
            "containers": [{"name": "worker", "image": "workers:1", "volumeMounts": snippet["extraVolumeMounts"]}],
        }
    )
    assert ".Subcharts.repoinstall" in text


PARENT_TEMPLATE = """{{- if .Values.repoinstall.enabled }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: workers
  labels: {app: workers}
spec:
  selector: {matchLabels: {app: workers}}
  template:
    metadata: {labels: {app: workers}}
    spec:
      initContainers:
        {{- include "repoinstall.initContainer" .Subcharts.repoinstall | nindent 8 }}
      volumes:
        {{- include "repoinstall.volumes" .Subcharts.repoinstall | nindent 8 }}
        - name: tmp
          emptyDir: {}
      containers:
        - name: worker
          image: workers:9.9.9
          volumeMounts:
            {{- include "repoinstall.repoMount" .Subcharts.repoinstall | nindent 12 }}
            - {name: tmp, mountPath: /tmp}
{{- end }}
"""


def test_a_parent_chart_includes_the_templates_with_the_subcharts_scope(tmp_path: Path) -> None:
    parent = tmp_path / "workers"
    shutil.copytree(CHART, parent / "charts" / "repoinstall")
    (parent / "templates").mkdir()
    (parent / "templates" / "workers.yaml").write_text(PARENT_TEMPLATE)
    (parent / "Chart.yaml").write_text(
        "apiVersion: v2\nname: workers\nversion: 9.9.9\nappVersion: 9.9.9\n"
        "dependencies:\n  - name: repoinstall\n    version: 0.1.0\n    condition: repoinstall.enabled\n"
    )
    (parent / "values.yaml").write_text("repoinstall:\n  enabled: true\n  requirements: [adaptor==1.4]\n")
    chart = helm.Chart.load(parent)
    rendered = chart.render({}, name="rel", namespace="workers", is_install=True)
    documents = [
        d for path, text in rendered.items() if not path.endswith("NOTES.txt") for d in yaml.safe_load_all(text) if d
    ]
    (workers,) = [d for d in documents if d["metadata"]["name"] == "workers"]
    spec = workers["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    # The subchart's own appVersion, name and values: no Chart dict written by hand.
    assert init["image"] == f"repoinstall:{yaml.safe_load((CHART / 'Chart.yaml').read_text())['appVersion']}" and init[
        "command"
    ] == ["repoinstall"]
    claim = next(v for v in spec["volumes"] if v["name"] == "repoinstall-repo")["persistentVolumeClaim"]["claimName"]
    assert claim in {d["metadata"]["name"] for d in documents if d["kind"] == "PersistentVolumeClaim"}
    for document in documents:
        for version in KUBERNETES:
            kubernetes_validate.validate(document, version, strict=True)
    off = chart.render({"repoinstall": {"enabled": False}}, name="rel", namespace="workers", is_install=True)
    assert not [text for text in off.values() if text.strip()]  # the condition turns the whole subchart off


def test_volume_permissions_is_off_by_default_and_only_root_when_asked() -> None:
    for documents in (
        render(VALUE_SETS["defaults"] | {"exampleWorker": {"enabled": True}}),
        render(VALUE_SETS["requirements"]),
    ):
        for spec in pod_specs(documents):
            for container in spec.get("initContainers", []) + spec["containers"]:
                assert container.get("securityContext", {}).get("runAsUser") != 0
    documents = render(VALUE_SETS["everything"])
    (job,) = of_kind(documents, "Job")
    spec = job["spec"]["template"]["spec"]
    # In the Job the step is an init container: it must finish before repoinstall starts.
    assert [c["name"] for c in spec["initContainers"]] == ["repoinstall-volume-permissions"]
    assert [c["name"] for c in spec["containers"]] == ["repoinstall"]
    (step,) = spec["initContainers"]
    assert step["image"] == "busybox:1.36"
    assert step["volumeMounts"] == [{"name": "repoinstall-repo", "mountPath": "/opt/repo", "subPath": "python"}]
    assert step["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "FOWNER", "FSETID"]}


@pytest.fixture
def world_readable() -> Iterator[Path]:
    """A directory any user can reach (pytest's own tmp_path is root's, mode 700)."""
    path = Path(tempfile.mkdtemp(prefix="repoinstall-helm-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def as_user(uid: int, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *command],
        check=False,
        capture_output=True,
        text=True,
    )


@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0, reason="needs root and setpriv")
def test_the_volume_permissions_step_makes_an_nfs_like_export_writable(world_readable: Path) -> None:
    """The rendered step, run for real with exactly the capabilities it is given, on a directory that is
    root's with mode 755, as an export where fsGroup is not applied looks."""
    repo = world_readable / "export"
    repo.mkdir(mode=0o755)
    assert as_user(10001, "test", "-x", str(repo)).returncode == 0  # the user reaches it...
    assert as_user(10001, "mkdir", str(repo / "trees")).returncode != 0  # ...and cannot write: what repoinstall meets
    values = {"repo": {"mountPath": str(repo)}, "volumePermissions": {"enabled": True}, "requirements": ["a==1"]}
    (step,) = of_kind(render(values), "Job")[0]["spec"]["template"]["spec"]["initContainers"]
    caps = ",".join(f"+{cap.lower()}" for cap in step["securityContext"]["capabilities"]["add"])
    assert step["securityContext"]["runAsUser"] == 0
    subprocess.run(["setpriv", f"--bounding-set=-all,{caps}", f"--inh-caps=-all,{caps}", *step["command"]], check=True)
    status = repo.stat()
    assert (status.st_uid, status.st_gid, oct(status.st_mode & 0o7777)) == (10001, 10001, "0o2775")
    assert as_user(10001, "mkdir", str(repo / "trees")).returncode == 0
    assert (repo / "trees").stat().st_gid == 10001  # setgid: what repoinstall creates keeps the group
    subprocess.run(["setpriv", f"--bounding-set=-all,{caps}", f"--inh-caps=-all,{caps}", *step["command"]], check=True)
    assert (repo / "trees").is_dir()  # a rerun (every pod start) changes nothing below


def test_the_chart_readme_describes_every_value() -> None:
    script = CHART.parent / "values_readme.py"
    result = subprocess.run([sys.executable, str(script), "--check"], check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    readme = (CHART / "README.md").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def keys(node: dict[str, Any], prefix: str = "") -> list[str]:
        found = []
        for name, value in node.items():
            found.append(prefix + name)
            if isinstance(value, dict) and value and prefix + name not in ("resources", "podSecurityContext",
                                                                           "securityContext"):  # fmt: skip
                found += keys(value, f"{prefix}{name}.")
        return found

    for key in keys(values):
        assert f"| `{key}` |" in readme, key  # every value the chart ships is in the table, with its description


def chart_digest(*args: str) -> subprocess.CompletedProcess[str]:
    script = CHART.parent / "chart_digest.py"
    return subprocess.run([sys.executable, str(script), *args], check=False, capture_output=True, text=True)


def test_the_chart_version_moves_with_every_change_under_helm() -> None:
    """helm/ is the tree whose digest helm/chart-digests.txt records for Chart.yaml's version (no git needed), and the
    recorded versions only go up, the current one last."""
    result = chart_digest("--check")
    assert result.returncode == 0, result.stderr.strip()
    recorded = [line.split()[0] for line in (CHART.parent / "chart-digests.txt").read_text().splitlines()
                if line.strip() and not line.startswith("#")]  # fmt: skip
    from packaging.version import Version

    assert [Version(v) for v in recorded] == sorted({Version(v) for v in recorded}), recorded
    assert recorded[-1] == str(yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]), recorded


def test_an_edit_under_helm_without_a_bump_fails_in_one_line_that_says_what_to_do(tmp_path: Path) -> None:
    helm_dir = tmp_path / "helm"
    shutil.copytree(CHART.parent, helm_dir, ignore=shutil.ignore_patterns("__pycache__"))
    assert chart_digest("--check", "--root", str(helm_dir)).returncode == 0
    with (helm_dir / "repoinstall" / "templates" / "NOTES.txt").open("a") as notes_file:
        notes_file.write("\n")
    result = chart_digest("--check", "--root", str(helm_dir))
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "bump `version` in helm/repoinstall/Chart.yaml" in result.stderr and "chart_digest.py" in result.stderr
    chart_yaml = helm_dir / "repoinstall" / "Chart.yaml"
    chart = chart_yaml.read_text()
    version = str(yaml.safe_load(chart)["version"])
    chart_yaml.write_text(chart.replace(f"version: {version}\n", "version: 99.0.0\n"))
    assert chart_digest("--check", "--root", str(helm_dir)).returncode == 1  # bumped, its line not yet added
    line = chart_digest("--root", str(helm_dir)).stdout
    assert line.startswith("99.0.0 sha256:")
    with (helm_dir / "chart-digests.txt").open("a") as digests:
        digests.write(line)
    assert chart_digest("--check", "--root", str(helm_dir)).returncode == 0, "the digests file is not its own input"


def test_trees_mount_as_image_volumes_on_pythonpath_and_validate_for_133_and_136() -> None:
    for version in IMAGE_VOLUME_KUBERNETES:
        report = helm.lint(CHART, IMAGE_VOLUMES, strict=True, kube_version=f"v{version}")
        assert not [m for m in report["messages"] if m["severity"] >= 2] + report["errors"], (version, report)
    documents = render(IMAGE_VOLUMES)
    for document in documents:
        for version in IMAGE_VOLUME_KUBERNETES:
            kubernetes_validate.validate(document, version, strict=True)
    (worker,) = of_kind(documents, "Deployment")
    spec = worker["spec"]["template"]["spec"]
    # Before 1.33 the API has no image volume: the same Deployment is refused (the validation is real).
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(worker, "1.29.0", strict=True)
    # Nothing to install (the trees are the images): the one init container checks their mounts.
    (check,) = spec["initContainers"]
    assert check["args"] == ["check-trees", "/trees/pandas", "/trees/tools"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["tree-pandas"] == {
        "name": "tree-pandas",
        "image": {"reference": f"registry.example:5000/trees@{DIGEST}", "pullPolicy": "IfNotPresent"},
    }
    assert volumes["tree-tools"]["image"] == {"reference": "registry.example:5000/trees:tools-1-cp311-cp311"}
    assert "repoinstall-repo" not in volumes  # no shared volume needed by the workers
    (container,) = spec["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["tree-pandas"] == {"name": "tree-pandas", "mountPath": "/trees/pandas", "readOnly": True}
    assert mounts["tree-tools"]["readOnly"] is True and mounts["tree-tools"]["mountPath"] == "/trees/tools"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PYTHONPATH"] == "/trees/pandas:/trees/tools"
    # The kubelet pulls image volumes with the pod's pull secrets: the registry's Secret joins the workers' own.
    assert spec["imagePullSecrets"] == [{"name": "workers-image"}, {"name": "registry-auth"}]
    # The prewarm Job still fills the registry from the shared repo: --from and --push.
    (job,) = of_kind(documents, "Job")
    (runner,) = job["spec"]["template"]["spec"]["containers"]
    assert runner["args"][-5:] == ["--from", "registry.example:5000/trees", "--registry-timeout", "60", "--push"]
    text = notes(IMAGE_VOLUMES)
    assert "containerd >= 2.1 or CRI-O >= 1.31" in text and "/trees/NAME" in text
    # Without image volumes the worker falls back to the shared repo and its init container.
    fallback = render({**IMAGE_VOLUMES, "imageVolumes": {"trees": []}})
    spec = of_kind(fallback, "Deployment")[0]["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["initContainers"]] == ["repoinstall"]
    assert "repoinstall-repo" in {v["name"] for v in spec["volumes"]}
    assert spec["imagePullSecrets"] == [{"name": "workers-image"}]


def test_the_image_check_runs_check_trees_on_every_mount_and_refuses_an_empty_one(tmp_path: Path) -> None:
    """The workers' init container, as rendered, run here: its command on the paths it names, with the worker's
    mounts (an empty one is what k3s has mounted with no error; one with a dist-info passes)."""
    root = tmp_path / "trees"
    values = {**IMAGE_VOLUMES, "imageVolumes": {**IMAGE_VOLUMES["imageVolumes"], "mountRoot": str(root)}}
    spec = of_kind(render(values), "Deployment")[0]["spec"]["template"]["spec"]
    (check,) = spec["initContainers"]
    (worker,) = spec["containers"]
    assert check["name"] == "repoinstall-check-trees" and check["command"] == ["repoinstall"]
    assert check["image"] == worker["image"] and check["securityContext"] == worker["securityContext"]
    assert check["volumeMounts"] == worker["volumeMounts"][:-1]  # every tree's, read-only; not the worker's /tmp
    assert all(mount["readOnly"] for mount in check["volumeMounts"])
    (root / "pandas" / "pandas-2.2.3.dist-info").mkdir(parents=True)
    (root / "tools").mkdir()
    command = [sys.executable, "-m", "repoinstall", *check["args"]]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 2, done
    assert done.stderr.startswith(f"repoinstall: error: {root}/tools holds no distribution (no *.dist-info)"), done
    assert "mounted empty (k3s#14323)" in done.stderr and len(done.stderr.splitlines()) == 1
    (root / "tools" / "tools-1.0.dist-info").mkdir()
    assert subprocess.run(command, capture_output=True, check=False).returncode == 0
    # The worker's PYTHONPATH as one argument checks the same trees.
    (python_path,) = [e["value"] for e in worker["env"] if e["name"] == "PYTHONPATH"]
    done = subprocess.run([*command[:4], python_path], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done
    assert "repoinstall.imageCheck" in notes(values)


def test_registry_values_give_from_push_and_its_credentials_secret() -> None:
    documents = render(VALUE_SETS["registry"])
    (job,) = of_kind(documents, "Job")
    worker = of_kind(documents, "Deployment")[0]["spec"]["template"]["spec"]
    (runner,) = job["spec"]["template"]["spec"]["containers"]
    (init,) = worker["initContainers"]
    assert "--push" in runner["args"] and "--push" not in init["args"]  # the Job fills, init containers pull
    for container, template in ((runner, job["spec"]["template"]["spec"]), (init, worker)):
        args = container["args"]
        assert args[args.index("--from") + 1] == "registry.example:5000/trees" and "--plain-http" not in args
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["REGISTRY_AUTH_FILE"] == "/etc/repoinstall/registry/config.json"
        assert env["REPOINSTALL_REGISTRY_CA"] == "/etc/repoinstall/registry-ca/ca.crt"
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        assert mounts["repoinstall-registry-auth"] == {
            "name": "repoinstall-registry-auth",
            "mountPath": "/etc/repoinstall/registry",
            "readOnly": True,
        }
        volumes = {v["name"]: v for v in template["volumes"]}
        assert volumes["repoinstall-registry-auth"]["secret"] == {
            "secretName": "registry-auth",
            "defaultMode": 0o400,
            "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
        }
        assert volumes["repoinstall-registry-ca"]["secret"]["secretName"] == "registry-ca"
    assert not of_kind(documents, "Secret")  # the chart never writes credentials
    plain = render({**VALUE_SETS["registry"], "registry": {"repository": "10.0.0.5:5000/trees", "plainHttp": True,
                                                            "push": False}})  # fmt: skip
    (job,) = of_kind(plain, "Job")
    (runner,) = job["spec"]["template"]["spec"]["containers"]
    assert "--plain-http" in runner["args"] and "--push" not in runner["args"]
    assert "REGISTRY_AUTH_FILE" not in str(runner["env"]) and "registry-auth" not in str(plain)
    assert "--from" not in str(render(VALUE_SETS["requirements"]))  # no registry, nothing of it


@pytest.mark.parametrize(
    "values",
    [
        {"registry": {"repository": "https://registry.example/trees"}},
        {"registry": {"repository": "user:pass@registry.example/trees"}},
        {"registry": {"repository": "registry.example/Trees"}},
        {"registry": {"repository": "registry.example"}},
        {"registry": {"timeout": 0}},
        {"imageVolumes": {"trees": [{"name": "pandas", "reference": "registry.example/trees"}]}},  # no tag or digest
        {"imageVolumes": {"trees": [{"name": "Pandas", "reference": f"registry.example/trees@{DIGEST}"}]}},
        {"imageVolumes": {"trees": [{"name": "p", "reference": f"registry.example/t@{DIGEST}", "pullPolicy": "Now"}]}},
        {"imageVolumes": {"trees": [{"reference": f"registry.example/trees@{DIGEST}"}]}},
        {"imageVolumes": {"mountRoot": "trees"}},
    ],
    ids=lambda v: str(v)[:60],
)
def test_schema_rejects_invalid_registry_and_image_volume_values(values: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmError):
        helm.Chart.load(CHART).validate_schema(values)
