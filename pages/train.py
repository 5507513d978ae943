"""Train MNIST: the eager custom training loop of TensorFlow's eager guide, run in a worker
process and charted live: loss, held-out accuracy, per-layer gradient norms, predictions."""
import base64
import time

import streamlit as st

from tapeviz import data
from tapeviz.draw import train_grids, train_vega
from tapeviz.state import debugger, training_run
from tapeviz.ui import frame, mode, session
from tapeviz.words.markdown import literal

POLL_S = 1.0             # how often the live part of the page redraws while a run trains
REDRAW_S = 3.0           # the heat strips' newest data waits this long at most (see rows_of)
CHART_PX = 340           # loss and gradient charts side by side, whole at 1280x720
# The demo's default learns within a minute on 2 cores; the guide's own CNN is one pick away.
MODELS = {"lenet": "LeNet-style CNN (~97% after 1 epoch)",
          "guide": "Eager guide's CNN (learns slowly)"}
GUIDE_NOTE = ("The eager guide's CNN (two 3x3 convolutions, global average pooling) is the "
              "guide's own code, and learns slowly: about 10–13% held-out accuracy after a "
              "minute on 2 cores. LeNet-style shows learning in that minute.")
RATES = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0]
DIGITS = {2_000: "2,000", 5_000: "5,000", 10_000: "10,000", 20_000: "20,000", None: "all"}
EVALS = {25: "every 25 steps", 50: "every 50 steps", 100: "every 100 steps", 0: "each epoch only"}
# Material icons: they come with Streamlit, where emoji need a font the machine may lack.
STATUS = {"queued": ":material/hourglass_top: Queued",
          "starting": ":material/hourglass_top: Starting a worker and loading the digits…",
          "running": ":material/play_arrow: Training", "paused": ":material/pause: Paused",
          "finished": ":green[:material/check_circle: Finished]", "stopped": ":material/stop: Stopped",
          "nan": ":red[:material/error: Stopped: the loss became NaN]",
          "failed": ":red[:material/error: Failed]"}

frame.require(__file__)


# -- callbacks (they run before the script) -------------------------------------------------
def owner_id():
    if "train_owner" not in st.session_state:
        st.session_state.train_owner = training_run.Owner(session.runner())
    return st.session_state.train_owner.id


def start():
    reset()
    s = st.session_state
    config = {"model": s.t_model, "epochs": int(s.t_epochs), "batch_size": int(s.t_batch),
              "learning_rate": float(s.t_lr), "limit": s.t_digits, "eval_every": int(s.t_eval),
              "use_tf_function": bool(s.t_tf_function)}
    if s.get("t_upload_b64"):
        config["upload_b64"] = s.t_upload_b64
    s.train_run = training_run.Run(session.runner(), config, owner_id(), client=session.client_id(),
                                   alive=session_alive())


def session_alive():
    """Whether this session's tab is still connected, askable from the run's own thread: a
    closed tab's run (paused ones too) frees its training worker within about a second."""
    from streamlit import runtime
    sid = session.session_id()
    if sid is None:
        return None
    return lambda: not runtime.exists() or runtime.get_instance().is_active_session(sid)


def rows_of(name, version, build, every=0.0):
    """A chart's rows, built again only when `version` changed, and at most every `every`
    seconds: on a 2-core laptop the page's own CPU time is taken from training."""
    memo = st.session_state.setdefault("_train_rows", {})
    old = memo.get(name)
    if old is None or (old[0] != version and time.monotonic() - old[2] >= every):
        memo[name] = old = (version, build(), time.monotonic())
    return old[1]


def reset():
    if (old := st.session_state.pop("train_run", None)) is not None:
        old.cancel()
    st.session_state.pop("_train_rows", None)


def check_upload():
    """Read an uploaded mnist.npz here (numpy only) so a wrong file is reported at once."""
    st.session_state.pop("t_upload_b64", None)
    st.session_state.pop("t_upload_note", None)
    file = st.session_state.get("t_upload")
    if file is None:
        return
    raw = file.getvalue()
    try:
        digits = data.load_npz_bytes(raw)
    except ValueError as exc:
        st.session_state.t_upload_note = ("error", literal(exc, 500))
        return
    count = len(digits.test_labels) + (len(digits.train_labels) if digits.has_train else 0)
    st.session_state.t_upload_b64 = base64.b64encode(raw).decode("ascii")
    st.session_state.t_upload_note = ("success", f"{literal(file.name, 200)}: {count:,} digits of shape "
                                      f"{digits.test_images.shape[1]}x{digits.test_images.shape[2]}.")


# -- the page -----------------------------------------------------------------------------
# One header line, so that the loss chart is above the fold at 1280x720.
head, walls = st.columns([5, 2], vertical_alignment="center")
head.markdown("**Train MNIST, eagerly:** TensorFlow's eager guide's loop, a `GradientTape` per step, "
              "Adam, shuffled `tf.data` batches, in a worker process.")
with walls:
    mode.banner(compact=True)

# The settings fold away once a run exists, so that its loss chart is above the fold at
# 1280x720; their label keeps saying what the run uses.
run = st.session_state.get("train_run")
settings = st.expander(training_run.settings_words(run.config if run else None, MODELS),
                       expanded=run is None, icon=":material/tune:")
# Two rows of four: one row of seven cut "32" to "3" at 1024 px, the projector's width.
c = [*settings.columns([2.4, 1.1, 1.6, 1.6]), *settings.columns([2.4, 1.1, 1.6, 1.6])]
c[0].selectbox("Model", list(MODELS), format_func=MODELS.get, key="t_model",
               help=GUIDE_NOTE)
c[1].number_input("Epochs", 1, 50, 3, key="t_epochs")
c[2].selectbox("Batch size", [16, 32, 64, 128, 256], index=1, key="t_batch")
c[4].select_slider("Learning rate", RATES, value=1e-3, key="t_lr", format_func=lambda r: f"{r:g}",
                   help="Adam's step size. 0.3 or 1.0 makes the loss jump or go NaN: try it.")
c[5].selectbox("Digits used", list(DIGITS), index=2, format_func=DIGITS.get, key="t_digits",
               help="Train + held-out; 20% are held out for the accuracy chart.")
c[6].selectbox("Held-out accuracy", list(EVALS), index=1, format_func=EVALS.get, key="t_eval")
with c[3]:
    st.write("")
    st.toggle("`@tf.function`", key="t_tf_function",
              help="Run the train step under @tf.function. Eager runs each op from Python; "
                   "tf.function traces the step once into a graph.")

with settings:
    if st.session_state.get("t_model") == "guide":
        st.caption(GUIDE_NOTE)
    st.caption(
        "**Where the digits come from:** the worker takes the first source that works: "
        "**1.** the directory in `TAPEVIZ_MNIST_DIR` "
        "(IDX `.gz` files or `mnist.npz`); **2.** Keras's cache `~/.keras/datasets/mnist.npz`; "
        "**3.** Keras's download; **4.** an `mnist.npz` uploaded here; **5.** offline, "
        "scikit-learn's 1,797 bundled 8x8 digits. The run says which one it used.")
    st.file_uploader("Upload mnist.npz (used when sources 1–3 are not available)", type=["npz"],
                     key="t_upload", on_change=check_upload)
    if note := st.session_state.get("t_upload_note"):
        getattr(st, note[0])(note[1])

# A run's page redraws every POLL_S, finished or not, so that nothing reruns the whole script
# under a run (that faded the page grey): only the first Start and Reset, pressed, do.
polling = run is not None


@st.fragment(run_every=POLL_S if polling else None)
def dashboard():
    run = st.session_state.get("train_run")     # its own thread folds the worker's records in
    if (run is not None) != polling:
        st.rerun()                  # start or stop the periodic redraw
    if run is not None:
        run.touch()
    status = run.status if run else None
    row = buttons(run, status)
    if run is None:
        st.info("Choose a model and settings, then press **Start**. The loss, the held-out accuracy, "
                "the gradient norm of every layer and sample predictions appear here as it trains.")
        show_speeds()
        return

    p = run.progress()
    if status == "running" and p["total"] and p["step"] >= p["total"]:
        status = "finished"     # every step ran; the worker is only packing up
    show_status(row, run, status, p)
    steps = training_run.thin(run.steps)
    n = (id(run), len(steps), steps[-1]["step"] if steps else 0)
    # Every chart sits in the same place on every redraw, whatever appears around it (the
    # warnings, the data line): an element that moves is a new one and is drawn from blank.
    show_charts(run, steps, n)
    show_numbers(run, status, p)
    with st.container():
        if run.start:
            show_data(run)
    with st.container():
        show_warnings(run)
    paths = train_grids.histogram_paths(steps)
    st.vega_lite_chart(rows_of("hist", n, lambda: train_grids.histogram_rows(steps, paths), REDRAW_S),
                       train_grids.histogram_spec(paths), key="hist_chart")
    layers = train_grids.histogram_paths(steps, train_grids.ACTIVATIONS)
    st.vega_lite_chart(rows_of("act", n, lambda: train_grids.histogram_rows(
                           steps, layers, field=train_grids.ACTIVATIONS), REDRAW_S),
                       train_grids.histogram_spec(layers, train_grids.ACTIVATIONS_TITLE, "|output|"),
                       key="act_chart")

    if (speed := run.speed()) is not None:
        st.session_state.setdefault("speeds", {}).setdefault(
            training_run.speed_key(run.config), {})[run.mode] = speed
    show_speeds()


def buttons(run, status):
    """Start, Stop, Resume, Reset and Inspect this step, in one row; the row, where the
    status goes after them."""
    # Buttons as wide as their words: in equal columns they shrank to "St…" at 1024 px.
    row = st.container(horizontal=True, vertical_alignment="center")
    row.button("Start", icon=":material/play_arrow:", type="primary", on_click=start, width="content",
               disabled=status in ("queued", "starting", "running", "paused"),
               help="A new run with the settings above.")
    row.button("Stop", icon=":material/pause:", on_click=lambda: run.pause(), width="content", disabled=status != "running",
               help="Pause the run; Resume carries on where it stopped, history and all.")
    row.button("Resume", icon=":material/resume:", on_click=lambda: run.resume(), width="content", disabled=status != "paused")
    row.button("Reset", icon=":material/restart_alt:", on_click=reset, width="content", disabled=run is None,
               help="End this run and clear its charts.")
    if row.button("Inspect this step", icon=":material/search:", width="content", disabled=not (run and run.start),
                  help="Record the step this run takes next (its weights, Adam's "
                       "state and batch) and show its tape on the debugger page, grouped "
                       "by layer. A finished run gives one step from fresh weights."):
        program = run.start["step_program"]
        # A sandboxed worker cannot write where the next worker reads: fresh weights there.
        snap = None if session.runner().sandboxed else run.snapshot_now()
        if snap and snap.get("step_program"):
            program = snap["step_program"]
        debugger.hand_over(st.session_state, program, call=0)   # the step's gradient flow
        st.switch_page("pages/debugger.py")
    return row


def show_status(row, run, status, p):
    """The run's state after the buttons, its progress bar, and its failure if it failed."""
    row.markdown(f"**{STATUS.get(status, status)}**"
                 + (f" — number **{run.place}** in line for a training worker" if status == "queued" else ""))
    label = (f"step {p['step']:,} of {p['total']:,}  ·  epoch {p['epoch']} of {p['epochs']}"
             if p["total"] else "waiting for the first step…")
    st.progress(p["fraction"], text=label)
    with st.container():
        if run.error:
            st.error(f"**The run failed:** {literal(run.error, 2_000)}")


def show_charts(run, steps, n):
    """Loss beside the per-layer gradient norms (both above the fold at 1280x720), then the
    held-out accuracy beside the predictions; `n` is the steps' version (the run, their
    count, the last)."""
    left, right = st.columns(2)
    log_loss = bool(st.session_state.get("t_log_loss"))
    # Vega-Lite: the same chart takes each update's rows in place (a plotly chart is
    # remounted, blank, whenever its figure changes); one spec per run and setting, and
    # the chart's whole height given to Streamlit, which fits the plot inside it.
    version = (n, len(run.warnings))
    left.vega_lite_chart(rows_of("loss", version, lambda: train_vega.loss_rows(steps)),
                         train_vega.loss_spec(log_loss, None), height=CHART_PX, key="loss_chart")
    right.vega_lite_chart(rows_of("grad", version, lambda: train_vega.norm_rows(steps, run.warnings)),
                          train_vega.norm_spec(None), height=CHART_PX, key="grad_chart")
    left.toggle("Log-scale loss", key="t_log_loss", help="One spike (say 800 after a learning rate "
                "of 1.0) flattens a linear axis; a log axis keeps the rest readable.")
    left, right = st.columns(2)
    left.vega_lite_chart(rows_of("accuracy", (id(run), len(run.evals)),
                                 lambda: train_vega.accuracy_rows(run.evals)),
                         train_vega.accuracy_spec(None), height=CHART_PX, key="accuracy_chart")
    # At its own size (width="content"): stretched, the digits would be squashed
    right.vega_lite_chart(rows_of("predictions", (id(run), id(run.predictions)),
                                  lambda: train_grids.prediction_rows(run.predictions)),
                          train_grids.prediction_spec(), width="content", key="prediction_chart")


def show_numbers(run, status, p):
    """Step, epoch, speed, ETA, loss and held-out accuracy, in one row."""
    m = st.columns(6)
    m[0].metric("Step", f"{p['step']:,}")
    m[1].metric("Epoch", f"{p['epoch']} / {p['epochs']}")
    # While it trains: the recent rate; once done, the steady rate the comparison below uses,
    # so that the page never shows two different speeds for one run.
    done_rate = run.speed() if status not in ("running", "paused", "starting", "queued") else None
    rate = done_rate or p["steps_per_s"]
    m[2].metric("Steps/s", f"{rate:.1f}" if rate else "—",
                help="After the run: steps per second over its later half (the first steps pay "
                     "for tracing). While it runs: over the last few steps.")
    m[3].metric("ETA", training_run.duration(p["eta_s"]))
    m[4].metric("Loss", f"{run.steps[-1]['loss']:.3f}" if run.steps else "—")
    m[5].metric("Held-out accuracy", f"{run.evals[-1]['accuracy']:.1%}" if run.evals else "—")


def show_data(run):
    """Where the run's digits came from, its model and settings; the sources passed over."""
    cfg = run.config
    st.caption(f"**Data:** {literal(run.start['source'], 300)}  ·  {run.start['train_size']:,} train / "
               f"{run.start['test_size']:,} held-out digits  ·  model **{cfg['model']}** "
               f"({run.start['params']:,} parameters), batch {cfg['batch_size']}, learning rate "
               f"{cfg['learning_rate']:g}, {run.mode}")
    if run.start.get("notes"):
        with st.expander("Sources passed over"):
            st.markdown("\n".join(f"- {literal(note, 500)}" for note in run.start["notes"]))


def show_warnings(run):
    """The first warning of each layer, six at most."""
    listed = training_run.first_per_layer(run.warnings)
    for warning in listed[:6]:
        (st.error if warning.get("kind") == "nan" else st.warning)(training_run.warning_text(warning))
    if len(listed) > 6:
        st.caption(f"…and {len(listed) - 6} more layers with warnings (see the gradient chart).")


def show_speeds():
    """Eager vs tf.function: the last measured steps/s of each, same model and batch size."""
    key = training_run.speed_key({"model": st.session_state.t_model,
                                 "batch_size": st.session_state.t_batch})
    speeds = st.session_state.get("speeds", {}).get(key, {})
    st.markdown(f"#### Eager vs `tf.function` — {key[0]} model, batch {key[1]}")
    s = st.columns([1, 1, 1, 3])
    # The unit in the label, as "Steps/s" above: a value with its unit was cut at 1280 px.
    s[0].metric("Eager, steps/s", f"{speeds['eager']:.1f}" if "eager" in speeds else "—")
    s[1].metric("tf.function, steps/s", f"{speeds['tf.function']:.1f}" if "tf.function" in speeds else "—")
    if len(speeds) == 2:
        s[2].metric("Speed-up", f"{speeds['tf.function'] / speeds['eager']:.1f}×")
        s[3].caption("Eager mode runs every op from Python, one at a time; `tf.function` traces "
                     "the step once into a graph that TensorFlow runs as a whole.")
    else:
        s[3].caption("Steps per second after the first few steps. Run the same model once with "
                     "the `@tf.function` toggle off and once with it on to compare.")


dashboard()
