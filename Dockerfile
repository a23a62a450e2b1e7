FROM python:3.11-slim

WORKDIR /app
# The web view must listen beyond the container's own loopback to be published; it still
# stays off without MOLTBOT_WEB_TOKEN (a non-loopback bind needs one; the start-up line says so).
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 MOLTBOT_WEB_HOST=0.0.0.0

COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install .

# The reranker's model is fetched once, at build time, by the same command as `make models`,
# into the providers.rerank.cache_dir that runtime.yaml names (./data/models/flashrank, i.e.
# /app/data/models/flashrank); at run time nothing is ever downloaded. A new named volume on
# /app/data starts with a copy of it.
COPY runtime.yaml ./
RUN python -m src.providers fetch-models

COPY sql ./sql
COPY notes.md ./

# the web view, its chat page, the HTTP API and MCP (web.port)
EXPOSE 8765
# healthy while the HTTP API answers its status (src/health.py; no curl in the slim image)
HEALTHCHECK --interval=30s --timeout=10s --start-period=120s --retries=3 CMD ["python", "-m", "src.health"]
CMD ["python", "-m", "src.main"]
