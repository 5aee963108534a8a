# pipesched: one image, run as the service or as a solve worker by argument.
#   docker build -t pipesched .
#   docker run -p 8000:8000 pipesched serve --db postgresql://postgres@db:5432/pipesched --workers external
#   docker run pipesched worker --db postgresql://postgres@db:5432/pipesched --concurrency 2
# Without arguments it serves the embedded default (SQLite in the container, local solver processes).
FROM python:3.11-slim

WORKDIR /opt/pipesched
COPY pyproject.toml constraints.txt README.md ./
COPY pipesched ./pipesched
COPY solver ./solver
COPY api ./api
COPY runtime ./runtime
RUN pip install --no-cache-dir -c constraints.txt ".[postgres,scaleout]" \
    && useradd --create-home --uid 10001 pipesched

USER pipesched
# Inside a container the service must listen beyond loopback; the port is published by the runner.
ENV PIPESCHED_HOST=0.0.0.0 \
    PIPESCHED_PORT=8000 \
    PYTHONUNBUFFERED=1
EXPOSE 8000
ENTRYPOINT ["pipesched"]
CMD ["serve"]
