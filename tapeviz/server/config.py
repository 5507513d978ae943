"""What a server runs with: local or hosted mode, how many workers, and the limits of each
(`Config.from_env`: the environment and the app's Streamlit secrets, TAPEVIZ_*).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Optional



@dataclass
class Limits:
    """What one worker may use. Local mode is generous; hosted mode is strict."""
    timeout_s: float = 30.0
    # A page's run that charts its steps live runs on to this, from its start (local mode:
    # the user watches it and has Stop); None: timeout_s holds (hosted: the class's walls)
    live_timeout_s: Optional[float] = None
    cpu_s: Optional[int] = None
    address_space_bytes: Optional[int] = None
    file_size_bytes: Optional[int] = None
    processes: Optional[int] = None
    max_ops: int = 20_000
    max_stdout: int = 100_000
    training_s: Optional[float] = None       # wall-clock bound on one training job
    disk_bytes: Optional[int] = None         # the sandboxed working directory's size (tmpfs)
    memory_bytes: Optional[int] = None       # a worker's memory cgroup (all its pages)
    open_files: Optional[int] = None         # RLIMIT_NOFILE

    def rlimits(self) -> dict:
        return {"cpu_s": self.cpu_s, "address_space_bytes": self.address_space_bytes,
                "file_size_bytes": self.file_size_bytes, "processes": self.processes,
                "open_files": self.open_files}


@dataclass
class Config:
    mode: str = "local"
    workers: int = 2                 # runs at once; others wait in the queue
    warm: int = 1                    # idle workers kept with TensorFlow imported
    training: int = 1                # training jobs at once (their own queue, beside the runs)
    limits: Limits = field(default_factory=Limits)
    sandbox: str = "auto"            # hosted mode: "auto" (bwrap when it works), "bwrap", "none"
    zygote: bool = True              # fork workers from one TF-imported process (hosted: sandboxed)
    link_run_s: float = 900.0        # how long pages opening an example's link share its run
    jobs_per_session: Optional[int] = 4    # queued + running jobs (runs and training) one owner may hold
    jobs_per_client: Optional[int] = 8     # the same for one browser (all its tabs' sessions)
    sleepers: int = 0                # runs whose program sleeps may give their slot way, so many

    @property
    def hosted(self) -> bool:
        return self.mode == "hosted"

    @classmethod
    def from_env(cls, env=os.environ) -> "Config":
        """TAPEVIZ_MODE=hosted turns on hosted mode; TAPEVIZ_WORKERS, _WARM, _TRAINING_JOBS,
        _TIMEOUT_S, _LIVE_TIMEOUT_S (local), _CPU_S, _MEMORY_GB, _FILE_MB, _PROCESSES, _TRAINING_S, _SANDBOX,
        _DISK_MB, _CGROUP_MEMORY_GB, _OPEN_FILES and _SLEEPERS override its limits; TAPEVIZ_ZYGOTE=0
        spawns workers instead of forking them (in hosted mode, each into its own bwrap); TAPEVIZ_LINK_RUN_S (0: never) is how
        long the pages that open one example's link share its recording;
        TAPEVIZ_JOBS_PER_SESSION and _JOBS_PER_CLIENT (0: no cap) cap the queued and running
        jobs of one session and one browser. In the app, Streamlit secrets named TAPEVIZ_*
        count too (the environment wins)."""
        if env is os.environ:
            env = {**_streamlit_secrets(), **os.environ}
        mode = env.get("TAPEVIZ_MODE", "local").strip().lower() or "local"
        if mode == "hosted":
            # Measured: a worker peaks at 1.8 GiB of address space on the mnist_step example
            # and 2.2 GiB training the guide CNN (TensorFlow maps much it never touches), and
            # runs about 10 threads. 3 GiB leaves room for the user's own tensors.
            limits = Limits(timeout_s=float(env.get("TAPEVIZ_TIMEOUT_S", 20)),
                            cpu_s=int(env.get("TAPEVIZ_CPU_S", 60)),
                            address_space_bytes=int(float(env.get("TAPEVIZ_MEMORY_GB", 3))
                                                    * 2**30),
                            file_size_bytes=int(float(env.get("TAPEVIZ_FILE_MB", 16)) * 2**20),
                            processes=int(env.get("TAPEVIZ_PROCESSES", 48)),
                            training_s=float(env.get("TAPEVIZ_TRAINING_S", 900)),
                            disk_bytes=int(float(env.get("TAPEVIZ_DISK_MB", 64)) * 2**20),
                            # Everything a worker's processes hold (memfd and tmpfs pages
                            # too), where a memory cgroup can be made; a worker's resident
                            # memory peaks well under its address space.
                            memory_bytes=int(float(env.get("TAPEVIZ_CGROUP_MEMORY_GB", 2.5))
                                             * 2**30),
                            # TensorFlow opens ~100 files; a low bound stops fd exhaustion.
                            open_files=int(env.get("TAPEVIZ_OPEN_FILES", 256)))
        else:
            limits = Limits(timeout_s=float(env.get("TAPEVIZ_TIMEOUT_S", 30)),
                            live_timeout_s=float(env.get("TAPEVIZ_LIVE_TIMEOUT_S", 600)) or None)
        # Hosted: one forked worker ready per run slot (about 13 MiB of its own each), so a
        # burst of Runs does not wait in its slot for a fork and TensorFlow's context. (More
        # slots than cores did not shorten thirty pages' waits: 4 and 8 slots on 2 cores gave
        # p95s of 8.8-16.7 s and 16.7 s against 2 slots' 10.8-13.9 s, bench/hosted_load.py
        # --browsers 30, within the waves' spread.)
        workers = int(env.get("TAPEVIZ_WORKERS", 2))
        return cls(mode=mode, workers=workers,
                   warm=int(env.get("TAPEVIZ_WARM", workers if mode == "hosted" else 1)),
                   training=int(env.get("TAPEVIZ_TRAINING_JOBS", 1)), limits=limits,
                   zygote=env.get("TAPEVIZ_ZYGOTE", "1").strip() != "0",
                   link_run_s=float(env.get("TAPEVIZ_LINK_RUN_S", 900)),
                   jobs_per_session=_cap(env.get("TAPEVIZ_JOBS_PER_SESSION", 4)),
                   jobs_per_client=_cap(env.get("TAPEVIZ_JOBS_PER_CLIENT", 8)),
                   # Hosted: tabs whose programs sleep (a forged "stopped", a time.sleep)
                   # must not hold the class's slots; each sleeper keeps its fixed deadline.
                   sleepers=int(env.get("TAPEVIZ_SLEEPERS", 2 * workers if mode == "hosted" else 0)),
                   sandbox=env.get("TAPEVIZ_SANDBOX", "auto").strip().lower() or "auto")


def _cap(value) -> Optional[int]:
    return int(value) or None


def _streamlit_secrets() -> dict:
    """TAPEVIZ_* entries of st.secrets, when running inside a Streamlit app (never imports
    Streamlit itself: the command line does not have it loaded)."""
    st = sys.modules.get("streamlit")
    if st is None:
        return {}
    try:
        return {k: str(v) for k, v in st.secrets.items() if k.startswith("TAPEVIZ_")}
    except Exception:  # noqa: BLE001 - no secrets file, or not in a script run: no secrets
        return {}
