# Attention Explorer for a container host: WORKERS Streamlit processes behind HAProxy, sticky by
# cookie, the same set-up as `make serve` (server/serve.py). Build and run where a Docker engine
# runs (the project machines have only the client, so it is linted there, not built):
#   docker build -t attention-explorer .
#   docker run --rm -p 8501:8501 -e WORKERS=2 attention-explorer
FROM python:3.11-slim

# make installs exactly what `make run` installs; haproxy is the load balancer. Their versions
# are the base image's Debian release's.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends haproxy make \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 10001 explorer
WORKDIR /home/explorer/app
USER 10001

# Dependencies first: a change to the code does not reinstall them.
COPY --chown=explorer Makefile requirements.txt ./
RUN make .venv/.app-installed

COPY --chown=explorer . .

ENV WORKERS=2
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s \
    CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"]
CMD [".venv/bin/python", "server/serve.py", "--address", "0.0.0.0", "--port", "8501"]
