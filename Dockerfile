# The Engram image for the distributed deployment (docker-compose.yml): API, relay and workers.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir . && useradd --system --home /app engram \
    && mkdir -p /var/lib/engram-tombstones && chown engram /var/lib/engram-tombstones
USER engram
ENV ENGRAM_DATA_DIR=/app/data ENGRAM_TOMBSTONE_DIR=/var/lib/engram-tombstones
EXPOSE 8080
CMD ["engram", "serve", "--host", "0.0.0.0", "--port", "8080"]
