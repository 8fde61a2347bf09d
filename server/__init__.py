"""The process that serves the pages: warm-up, memory, idle model release, session expiry, and
several workers behind HAProxy. Below `ui/`, not in it: nothing here draws anything, and nothing
here imports `ui/` or `pages/` (the router hands the warm-up the page list and the preload step).

    model_host
              `ModelHost`: each real model loaded once per process and shared, let go when
              idle together with the caches of what it computed, default views prepared
    warmup    `ready()`: every heavy import, and every page's own modules, once per process,
              before any session runs a page; starts the memory trim thread
    resident  what a process and its children hold in memory, read from /proc
    memory    glibc's malloc knobs (trim, keep freed memory for the next forward pass) and the
              thread that trims every TRIM_EVERY_SECONDS
    lane      two lanes of model runs, one run at a time in each, and the GIL's switch interval
    process_load
              a model read in a child process, or read there and kept by the child
    frames    a value and its arrays as one frame, read back with one call into one buffer
    shared_memory
              a frame in a memfd that the server and the model's child both map
    kept_process
              calls into the child that keeps a model: its long runs made there
    saved_loads
              a loaded model's frame kept on disk, copied back by the next load of it
    child     what the server and its child agree on: a function's name, a child's end
    loaded_once
              `LoadedOnce`: one value per process, loaded in a thread of its own
    idle      `IdleRelease`: let a model go after some minutes without a viewer
    sessions  the one module that touches Streamlit's private internals: dropping the stored
              sessions of tabs that closed too long ago (tests/test_app.py pins that layout)
    serve     N Streamlit workers behind HAProxy, sticky by cookie (`make serve`, Dockerfile)
"""
