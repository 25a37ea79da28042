"""Check that .github/workflows/npu.yml runs ci/npu/run-tests.sh the way ci/npu/README.md says.

    python ci/npu/check-workflow.py [WORKFLOW]

Asserts: the file parses; it triggers on push, pull_request and workflow_dispatch; a job on
`ubuntu-latest` runs `ci/npu/run-tests.sh --dry-run`; a job on `[self-hosted, ascend, <soc>]`
with a matrix over a2 / a3 runs `ci/npu/run-tests.sh` for real (no --dry-run), with
--expect-soc from the matrix, and uploads the JUnit XML path it passed with --junit-xml, also
when the tests failed; fork pull requests never reach the self-hosted job; every script the
workflow names exists. Prints what it found; exits 1 with the failed checks. Needs PyYAML.
"""

from __future__ import annotations

import os
import re
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = "ci/npu/run-tests.sh"


def steps_text(job: dict) -> list[str]:
    return [str(s.get("run", "")) for s in job.get("steps", []) if isinstance(s, dict)]


def runs_on(job: dict) -> list[str]:
    value = job.get("runs-on", [])
    return [value] if isinstance(value, str) else [str(v) for v in value]


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, ".github/workflows/npu.yml")
    with open(path, encoding="utf-8") as f:
        wf = yaml.safe_load(f)
    errors: list[str] = []

    def expect(cond: bool, msg: str) -> bool:
        if not cond:
            errors.append(msg)
        return cond

    expect(isinstance(wf, dict), "the workflow is not a mapping")
    # YAML 1.1 reads the key `on` as the boolean True.
    triggers = wf.get("on", wf.get(True))
    if isinstance(triggers, str):
        triggers = [triggers]
    for event in ("push", "pull_request", "workflow_dispatch"):
        expect(triggers is not None and event in triggers, f"no `{event}` trigger")
    jobs = wf.get("jobs") or {}
    expect(bool(jobs), "no jobs")

    dry_jobs, npu_jobs = [], []
    for name, job in jobs.items():
        text = "\n".join(steps_text(job))
        if SCRIPT not in text:
            continue
        labels = runs_on(job)
        if "ubuntu-latest" in labels and re.search(re.escape(SCRIPT) + r"\s+--dry-run", text):
            dry_jobs.append(name)
        if "self-hosted" in labels and "ascend" in labels:
            npu_jobs.append(name)

    expect(len(dry_jobs) >= 1, f"no job on ubuntu-latest runs `{SCRIPT} --dry-run`")
    if expect(len(npu_jobs) >= 1, f"no job on [self-hosted, ascend, ...] runs {SCRIPT}"):
        for name in npu_jobs:
            job = jobs[name]
            labels = runs_on(job)
            socs = ((job.get("strategy") or {}).get("matrix") or {}).get("soc") or []
            expect(sorted(socs) == ["a2", "a3"], f"job {name}: matrix.soc is {socs}, not [a2, a3]")
            expect(
                any("matrix.soc" in label for label in labels),
                f"job {name}: runs-on {labels} does not pick the runner by matrix.soc",
            )
            cond = str(job.get("if", ""))
            expect(
                "pull_request" in cond and "github.repository" in cond,
                f"job {name}: no `if:` keeping fork pull requests off the self-hosted runners",
            )
            runs = [t for t in steps_text(job) if SCRIPT in t]
            expect(
                all("--dry-run" not in t for t in runs),
                f"job {name}: calls {SCRIPT} with --dry-run on the NPU",
            )
            joined = "\n".join(runs)
            expect(
                "--expect-soc" in joined and "matrix.soc" in joined,
                f"job {name}: does not pass --expect-soc from the matrix",
            )
            m = re.search(r'--junit-xml\s+(?:"([^"]+)"|(\S+))', joined)
            if expect(m is not None, f"job {name}: no --junit-xml PATH"):
                junit = m.group(1) or m.group(2)
                uploads = [
                    s
                    for s in job.get("steps", [])
                    if isinstance(s, dict)
                    and str(s.get("uses", "")).startswith("actions/upload-artifact")
                ]
                if expect(bool(uploads), f"job {name}: no actions/upload-artifact step"):
                    up = uploads[0]
                    expect(
                        str((up.get("with") or {}).get("path", "")).strip() == junit,
                        f"job {name}: uploads {(up.get('with') or {}).get('path')!r}, "
                        f"the script writes {junit!r}",
                    )
                    expect(
                        "always()" in str(up.get("if", "")),
                        f"job {name}: the upload does not run when the tests fail (if: always())",
                    )
                print(f"npu job {name!r}: runs-on {labels}, matrix.soc {socs}, JUnit {junit}")
    for name in dry_jobs:
        print(f"dry-run job {name!r}: runs-on {runs_on(jobs[name])}")

    # Every repository script the workflow runs exists.
    for name, job in jobs.items():
        for text in steps_text(job):
            for ref in re.findall(r"\b(ci/[\w./-]+\.(?:sh|py))\b", text):
                expect(os.path.isfile(os.path.join(REPO, ref)), f"job {name}: {ref} does not exist")

    if errors:
        for e in errors:
            print(f"FAIL: {e}")
        print(f"check-workflow: {path}: {len(errors)} problem(s)")
        return 1
    print(f"check-workflow: {path}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
