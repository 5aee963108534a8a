# pipesched service image: the README's install (pip install .), without the torch runtime extra.
#   docker build -t pipesched . && docker run -p 8000:8000 -v pipesched-data:/data pipesched
# Settings come from PIPESCHED_* variables (PIPESCHED_DB, PIPESCHED_TOKEN, PIPESCHED_SERVICE_MAX_OPS, ...).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY pipesched ./pipesched
COPY solver ./solver
COPY api ./api
COPY runtime ./runtime
# The postgres extra adds the psycopg driver for --db postgresql://...; no torch is installed.
RUN pip install ".[postgres]" && rm -rf /src

RUN useradd --create-home --uid 10001 pipesched && mkdir /data && chown pipesched /data
USER pipesched
WORKDIR /home/pipesched
VOLUME /data
ENV PIPESCHED_DB=sqlite:////data/cache.db
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status != 200)"]

ENTRYPOINT ["pipesched", "serve", "--host", "0.0.0.0", "--port", "8000"]
